package bench

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// Protocols a scenario speaks.
const (
	ProtoTLCP  = "tlcp"
	ProtoTLS12 = "tls1.2"
	ProtoTLS13 = "tls1.3"
	// ProtoTLS13SM is TLS 1.3 with the ShangMi suites of RFC 8998
	// (package tlcp/tls13), SM2 certificate and sm2sig_sm3 signatures.
	ProtoTLS13SM = "tls1.3-sm"
)

// Scenario is one line of a handshake run: a protocol and suite, and how
// many of its connections resume a session.
type Scenario struct {
	// Name labels the scenario in reports.
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	// Suite is the TLCP suite, or the TLS suite and key exchange.
	Suite string `json:"suite"`
	// ResumeRatio is the share of connections that offer to resume the
	// session of an earlier one (0 to 1).
	ResumeRatio float64 `json:"resume_ratio"`

	tlcpSuite uint16
	tlsSuites []uint16
	curves    []tls.CurveID
	// smGroups is the group a TLS 1.3 ShangMi scenario offers.
	smGroups []tls13.CurveID
}

// resumeSuffix is what the scenario's name says of resumption.
func (s Scenario) resumeSuffix() string {
	switch {
	case s.ResumeRatio >= 1:
		return " resumed"
	case s.ResumeRatio > 0:
		return fmt.Sprintf(" %g%% resumed", s.ResumeRatio*100)
	}
	return ""
}

// needsClientCert reports whether the scenario needs the client's dual
// certificate (the TLCP ECDHE suites).
func (s Scenario) needsClientCert() bool {
	return s.Protocol == ProtoTLCP && strings.HasPrefix(s.Suite, "ECDHE_")
}

// DefaultComparison is what a run without --suite measures against a
// server it starts itself.
const DefaultComparison = "ECC_SM4_GCM_SM3,ECDHE_SM4_GCM_SM3,ECC_SM4_GCM_SM3+resumed,TLS1.3-SM,TLS1.3-SM+resumed,TLS1.3,TLS1.2"

// ScenarioNames lists the names ParseScenarios accepts.
func ScenarioNames() []string {
	names := []string{}
	for _, s := range tlcp.CipherSuites() {
		names = append(names, s.Name)
	}
	return append(names, "TLS1.2", "TLS1.2-X25519", "TLS1.3", "TLS1.3-MLKEM", "TLS1.3-SM", "TLS1.3-SM-MLKEM")
}

// ParseScenarios reads a comma-separated list of suite names, each
// optionally followed by "+resumed" (every connection after the first
// resumes). Scenarios without "+resumed" get resume as their ratio.
func ParseScenarios(list string, resume float64) ([]Scenario, error) {
	if !(resume >= 0 && resume <= 1) {
		return nil, fmt.Errorf("resumption ratio %g: give a number from 0 to 1", resume)
	}
	var out []Scenario
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, suffix, _ := strings.Cut(item, "+")
		ratio := resume
		switch strings.ToLower(suffix) {
		case "":
		case "resumed", "resume":
			ratio = 1
		default:
			return nil, fmt.Errorf("suite %q: unknown suffix %q (only +resumed is known)", item, suffix)
		}
		s, err := scenarioFor(name)
		if err != nil {
			return nil, err
		}
		s.ResumeRatio = ratio
		s.Name += s.resumeSuffix()
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no suite given (known: %s)", strings.Join(ScenarioNames(), ", "))
	}
	return out, nil
}

func scenarioFor(name string) (Scenario, error) {
	upper := strings.ToUpper(name)
	if id, ok := tlcp.CipherSuiteByName(upper); ok {
		canonical := tlcp.CipherSuiteName(id)
		return Scenario{Name: canonical, Protocol: ProtoTLCP, Suite: canonical, tlcpSuite: id}, nil
	}
	// A TLS scenario offers one key exchange group and AES-128-GCM; the
	// server's certificate decides the signature (ECDSA or RSA). Its name
	// says what it offers; the report's row names what was negotiated.
	tls12 := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	switch strings.ReplaceAll(upper, "_", "") {
	case "TLS1.2", "TLS12", "TLSECDHEECDSAWITHAES128GCMSHA256":
		return Scenario{
			Name: "TLS1.2 P-256", Protocol: ProtoTLS12,
			Suite:     "ECDHE AES-128-GCM P-256",
			tlsSuites: tls12,
			curves:    []tls.CurveID{tls.CurveP256},
		}, nil
	case "TLS1.2-X25519", "TLS12-X25519":
		return Scenario{
			Name: "TLS1.2 X25519", Protocol: ProtoTLS12,
			Suite:     "ECDHE AES-128-GCM X25519",
			tlsSuites: tls12,
			curves:    []tls.CurveID{tls.X25519},
		}, nil
	case "TLS1.3", "TLS13":
		return Scenario{
			Name: "TLS1.3 X25519", Protocol: ProtoTLS13,
			Suite:  "TLS_AES_128_GCM_SHA256 X25519",
			curves: []tls.CurveID{tls.X25519},
		}, nil
	case "TLS1.3-SM", "TLS13-SM":
		// TLS 1.3 ShangMi offers TLS_SM4_GCM_SM3 and one group; the
		// server's SM2 certificate signs with sm2sig_sm3.
		return Scenario{
			Name: "TLS1.3-SM curveSM2", Protocol: ProtoTLS13SM,
			Suite:    "TLS_SM4_GCM_SM3 curveSM2",
			smGroups: []tls13.CurveID{tls13.CurveSM2},
		}, nil
	case "TLS1.3-SM-MLKEM", "TLS13-SM-MLKEM":
		return Scenario{
			Name: "TLS1.3-SM curveSM2MLKEM768", Protocol: ProtoTLS13SM,
			Suite:    "TLS_SM4_GCM_SM3 curveSM2MLKEM768",
			smGroups: []tls13.CurveID{tls13.CurveSM2MLKEM768},
		}, nil
	case "TLS1.3-MLKEM", "TLS13-MLKEM":
		return Scenario{
			Name: "TLS1.3 X25519MLKEM768", Protocol: ProtoTLS13,
			Suite:  "TLS_AES_128_GCM_SHA256 X25519MLKEM768",
			curves: []tls.CurveID{tls.X25519MLKEM768},
		}, nil
	}
	known := ScenarioNames()
	slices.Sort(known)
	return Scenario{}, fmt.Errorf("unknown suite %q (known: %s)", name, strings.Join(known, ", "))
}

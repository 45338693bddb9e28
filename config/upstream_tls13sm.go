package config

import (
	"fmt"
	"net"
	"strings"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// SchemeTLS13SM is the scheme of upstream targets reached over TLS 1.3
// with the ShangMi suites of RFC 8998.
const SchemeTLS13SM = "tls13sm"

// UpstreamTLS13SM configures tls13sm:// targets: gmgate as a TLS 1.3
// ShangMi client (RFC 8998), carrying HTTP requests or, from tcp
// listeners, whole connections. It mirrors UpstreamTLCP where the two
// protocols agree; TLS 1.3 has one certificate per side, so the client
// identity is a signing pair alone.
type UpstreamTLS13SM struct {
	// CA is a PEM file of the CAs that issue the targets' certificates;
	// the system pool when empty.
	CA string `yaml:"ca"`
	// ServerName is the name checked in the targets' certificates and sent
	// as SNI (never for an IP address); the target's host when empty.
	ServerName string `yaml:"server_name"`
	// SignCert and SignKey are the client's SM2 certificate (PEM, leaf
	// then chain) and key reference (a path, file:..., sdf:...), sent
	// when a target asks for a client certificate. With a TLCP dual pair,
	// this is the signing pair.
	SignCert string `yaml:"sign_cert"`
	SignKey  string `yaml:"sign_key"`
	// Suites are the cipher suites offered, in preference order.
	Suites []string `yaml:"suites"`
	// Groups are the key exchange groups offered, in preference order;
	// the client sends a key share for the first.
	Groups []string `yaml:"groups"`
	// InsecureSkipVerify accepts any server certificate. For tests only;
	// logged as a warning at every start and reload.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// SessionCache bounds the tickets kept to resume with the targets
	// (one per target is used); size 0 turns resumption off.
	SessionCache *SessionCache `yaml:"session_cache"`
	// Revocation checks the targets' certificates against CRLs and OCSP
	// responders, as for tlcp:// (none when nil).
	Revocation *Revocation `yaml:"revocation"`
}

// HasIdentity reports whether a client certificate is configured.
func (t *UpstreamTLS13SM) HasIdentity() bool {
	return t != nil && (t.SignCert != "" || t.SignKey != "")
}

// TLS13SuiteByName returns the TLS 1.3 ShangMi suite named name.
func TLS13SuiteByName(name string) (uint16, bool) {
	for _, id := range tls13.DefaultCipherSuites {
		if tls13.CipherSuiteName(id) == name {
			return id, true
		}
	}
	return 0, false
}

// TLS13GroupByName returns the TLS 1.3 ShangMi group named name.
func TLS13GroupByName(name string) (tls13.CurveID, bool) {
	for _, g := range []tls13.CurveID{tls13.CurveSM2, tls13.CurveSM2MLKEM768} {
		if g.String() == name {
			return g, true
		}
	}
	return 0, false
}

func tls13SuiteNames() []string {
	var names []string
	for _, id := range tls13.DefaultCipherSuites {
		names = append(names, tls13.CipherSuiteName(id))
	}
	return names
}

func tls13GroupNames() []string {
	var names []string
	for _, g := range tls13.DefaultCurvePreferences {
		names = append(names, g.String())
	}
	return names
}

// tls13SMDefaults fills in a tls13sm:// upstream's client settings; the
// section is made when the file leaves it out, so that resumption is on
// by default as for tlcp://.
func (u *Upstream) tls13SMDefaults() {
	if u.Scheme() != SchemeTLS13SM && u.TLS13SM == nil {
		return
	}
	if u.TLS13SM == nil {
		u.TLS13SM = &UpstreamTLS13SM{}
	}
	t := u.TLS13SM
	if len(t.Suites) == 0 {
		t.Suites = tls13SuiteNames()
	}
	if len(t.Groups) == 0 {
		t.Groups = tls13GroupNames()
	}
	if t.SessionCache == nil {
		t.SessionCache = &SessionCache{}
	}
	setIntPtr(&t.SessionCache.Size, DefaultUpstreamSessions)
	setDuration(&t.SessionCache.Lifetime, tls13.DefaultSessionLifetime)
	revocationDefaults(t.Revocation)
}

// upstreamTLS13SM checks the client settings of a tls13sm:// upstream
// without opening anything: proxy loads the certificate and key.
func (v *validator) upstreamTLS13SM(p, scheme string, t *UpstreamTLS13SM) {
	if scheme != "" && scheme != SchemeTLS13SM {
		v.add(p, "tls13sm settings apply to tls13sm:// targets only", "remove tls13sm, or use tls13sm:// targets")
	}
	if t.CA != "" {
		v.notInline(p+".ca", t.CA)
	}
	if t.ServerName != "" && !validHost(t.ServerName) && net.ParseIP(t.ServerName) == nil {
		v.add(p+".server_name", fmt.Sprintf("%q is not a host name or IP address", t.ServerName), "write the name the targets' certificate carries, such as api.partner.cn")
	}
	switch {
	case t.SignCert != "" && t.SignKey == "":
		v.add(p+".sign_cert", "the client certificate has no key: sign_key is not set", "set sign_key to the certificate's key")
	case t.SignCert == "" && t.SignKey != "":
		v.add(p+".sign_key", "the client key has no certificate: sign_cert is not set", "set sign_cert to the key's certificate")
	}
	if t.SignCert != "" {
		v.notInline(p+".sign_cert", t.SignCert)
	}
	if t.SignKey != "" {
		v.keyRef(p+".sign_key", t.SignKey)
	}
	seen := map[string]bool{}
	for i, s := range t.Suites {
		sp := fmt.Sprintf("%s.suites[%d]", p, i)
		if _, ok := TLS13SuiteByName(s); !ok {
			fix := "use " + strings.Join(tls13SuiteNames(), " or ")
			if _, tlcpSuite := tlcp.CipherSuiteByName(s); tlcpSuite {
				fix += " (" + s + " is a TLCP suite, for tlcp:// targets)"
			}
			v.add(sp, fmt.Sprintf("unknown TLS 1.3 ShangMi cipher suite %q", s), fix)
			continue
		}
		if seen["s"+s] {
			v.add(sp, s+" is listed twice", "list each suite once")
		}
		seen["s"+s] = true
	}
	for i, g := range t.Groups {
		gp := fmt.Sprintf("%s.groups[%d]", p, i)
		if _, ok := TLS13GroupByName(g); !ok {
			v.add(gp, fmt.Sprintf("unknown group %q", g), "use "+strings.Join(tls13GroupNames(), " or ")+" (names are case-sensitive)")
			continue
		}
		if seen["g"+g] {
			v.add(gp, g+" is listed twice", "list each group once")
		}
		seen["g"+g] = true
	}
	v.sessionCache(p, t.SessionCache)
	v.upstreamRevocation(p, t.InsecureSkipVerify, t.Revocation)
}

package revocation

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Status is what a check found out about a certificate.
type Status int

const (
	// StatusUnknown means no source could say: none covers the
	// certificate's issuer, or every source covering it is unavailable
	// or out of date.
	StatusUnknown Status = iota
	// StatusGood means a current source vouches for the certificate.
	StatusGood
	// StatusRevoked means a source lists the certificate as revoked.
	StatusRevoked
)

func (s Status) String() string {
	switch s {
	case StatusGood:
		return "good"
	case StatusRevoked:
		return "revoked"
	}
	return "unknown"
}

// Policy says what to do with a certificate whose status is unknown.
type Policy string

const (
	// FailClosed refuses a certificate whose status is unknown: the
	// default, and the right choice with client_auth require_and_verify.
	FailClosed Policy = "fail_closed"
	// FailOpen admits a certificate whose status is unknown (a revoked
	// one is still refused).
	FailOpen Policy = "fail_open"
)

// ParsePolicy reads "fail_closed" or "fail_open"; the empty string is
// FailClosed.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "", FailClosed:
		return FailClosed, nil
	case FailOpen:
		return FailOpen, nil
	}
	return "", fmt.Errorf("unknown revocation policy %q: use fail_closed or fail_open", s)
}

// Defaults of the options.
const (
	// DefaultGrace is how long after its nextUpdate the last good CRL or
	// OCSP response is still used while its source cannot be reached.
	DefaultGrace = time.Hour
	// DefaultTimeout bounds one fetch of a CRL or an OCSP response.
	DefaultTimeout = 10 * time.Second
	// clockSkew is how far in the future a thisUpdate may lie.
	clockSkew = 5 * time.Minute
)

// Reason is a CRLReason (RFC 5280 section 5.3.1).
type Reason int

// The CRL reasons of RFC 5280 (7 is not used).
const (
	ReasonUnspecified          Reason = 0
	ReasonKeyCompromise        Reason = 1
	ReasonCACompromise         Reason = 2
	ReasonAffiliationChanged   Reason = 3
	ReasonSuperseded           Reason = 4
	ReasonCessationOfOperation Reason = 5
	ReasonCertificateHold      Reason = 6
	ReasonRemoveFromCRL        Reason = 8
	ReasonPrivilegeWithdrawn   Reason = 9
	ReasonAACompromise         Reason = 10
)

var reasonNames = map[Reason]string{
	ReasonUnspecified:          "unspecified",
	ReasonKeyCompromise:        "keyCompromise",
	ReasonCACompromise:         "cACompromise",
	ReasonAffiliationChanged:   "affiliationChanged",
	ReasonSuperseded:           "superseded",
	ReasonCessationOfOperation: "cessationOfOperation",
	ReasonCertificateHold:      "certificateHold",
	ReasonRemoveFromCRL:        "removeFromCRL",
	ReasonPrivilegeWithdrawn:   "privilegeWithdrawn",
	ReasonAACompromise:         "aACompromise",
}

// String returns the RFC 5280 name of the reason (keyCompromise, ...).
func (r Reason) String() string {
	if n, ok := reasonNames[r]; ok {
		return n
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// ParseReason reads a reason by its RFC 5280 name, in any case, with or
// without hyphens or underscores (keyCompromise, key-compromise).
func ParseReason(s string) (Reason, error) {
	norm := func(v string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(v))
	}
	for r, n := range reasonNames {
		if norm(n) == norm(s) && r != ReasonRemoveFromCRL {
			return r, nil
		}
	}
	names := make([]string, 0, len(reasonNames))
	for r := Reason(0); r <= ReasonAACompromise; r++ {
		if n, ok := reasonNames[r]; ok && r != ReasonRemoveFromCRL {
			names = append(names, n)
		}
	}
	return 0, fmt.Errorf("unknown revocation reason %q: use one of %s", s, strings.Join(names, ", "))
}

// Result is the answer about one certificate.
type Result struct {
	Status Status
	// Serial and Subject name the certificate checked (Subject is empty
	// in a good answer).
	Serial  *big.Int
	Subject string
	// Source names where the answer came from: a CRL file, a CRL URL or
	// an OCSP responder (URLs without any user information).
	Source string
	// RevokedAt and Reason are set for StatusRevoked.
	RevokedAt time.Time
	Reason    Reason
	// Detail says why the status is unknown, or that the answer came from
	// a source that could not be refreshed.
	Detail string
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "certificate %q (serial %s) ", r.Subject, serialHex(r.Serial))
	switch r.Status {
	case StatusRevoked:
		fmt.Fprintf(&b, "was revoked at %s (%s)", r.RevokedAt.UTC().Format(time.RFC3339), r.Reason)
	case StatusGood:
		b.WriteString("is not revoked")
	default:
		b.WriteString("has an unknown revocation status")
	}
	if r.Source != "" {
		fmt.Fprintf(&b, " according to %s", r.Source)
	}
	if r.Detail != "" {
		fmt.Fprintf(&b, ": %s", r.Detail)
	}
	return b.String()
}

// serialHex writes a serial number as OpenSSL prints it: upper-case hex.
func serialHex(n *big.Int) string {
	if n == nil {
		return "?"
	}
	return strings.ToUpper(n.Text(16))
}

// Error is the error Verify returns for a certificate it refuses.
type Error struct {
	Result Result
}

func (e *Error) Error() string { return e.Result.String() }

// Revoked reports whether the certificate was refused as revoked rather
// than for an unknown status.
func (e *Error) Revoked() bool { return e.Result.Status == StatusRevoked }

// Alert is the TLS/TLCP alert that fits the refusal:
// certificate_revoked (44) or certificate_unknown (46).
func (e *Error) Alert() uint8 {
	if e.Revoked() {
		return 44
	}
	return 46
}

// SourceState is the state of a CRL source or an OCSP responder.
type SourceState int

const (
	// SourceOK: the last fetch succeeded and its answer is current.
	SourceOK SourceState = iota
	// SourceFailing: fetches fail, but the last good answer is still
	// before its nextUpdate.
	SourceFailing
	// SourceStale: past nextUpdate, within the grace: the last good
	// answer is still used.
	SourceStale
	// SourceExpired: nothing usable (never loaded, or past nextUpdate
	// plus the grace); the policy decides.
	SourceExpired
)

func (s SourceState) String() string {
	switch s {
	case SourceOK:
		return "ok"
	case SourceFailing:
		return "failing"
	case SourceStale:
		return "stale"
	}
	return "expired"
}

// Observer hears what a checker does, for metrics and logs. Its methods
// are called from handshakes and from refresh goroutines: they must be
// quick and safe for concurrent use.
type Observer interface {
	// SourceChanged is called when a source's state changes; err is the
	// last fetch error (nil for SourceOK).
	SourceChanged(source string, state SourceState, err error)
	// Decided is called for every certificate Verify did not find good:
	// refused (revoked, or unknown under FailClosed) or admitted with an
	// unknown status under FailOpen.
	Decided(r Result, refused bool)
}

type nopObserver struct{}

func (nopObserver) SourceChanged(string, SourceState, error) {}
func (nopObserver) Decided(Result, bool)                     {}

// cert is what a check needs of a certificate, from smx509 or
// crypto/x509 alike.
type cert struct {
	serial     *big.Int
	name       *pkix.Name
	raw        []byte
	rawSubject []byte
	rawIssuer  []byte
	rawSPKI    []byte
	ocsp       []string
	// sm is the parsed certificate when it came from smx509.
	sm *smx509.Certificate
}

func fromSM(c *smx509.Certificate) cert {
	return cert{serial: c.SerialNumber, name: &c.Subject, raw: c.Raw, rawSubject: c.RawSubject,
		rawIssuer: c.RawIssuer, rawSPKI: c.RawSubjectPublicKeyInfo, ocsp: c.OCSPServer, sm: c}
}

func fromX509(c *x509.Certificate) cert {
	return cert{serial: c.SerialNumber, name: &c.Subject, raw: c.Raw, rawSubject: c.RawSubject,
		rawIssuer: c.RawIssuer, rawSPKI: c.RawSubjectPublicKeyInfo, ocsp: c.OCSPServer}
}

// subject is the certificate's subject as text, for answers and
// messages (made only when asked: a handshake's good answer does not
// need it).
func (c cert) subject() string {
	if c.name == nil {
		return ""
	}
	return c.name.String()
}

// parsed returns the certificate as smx509 parses it.
func (c cert) parsed() (*smx509.Certificate, error) {
	if c.sm != nil {
		return c.sm, nil
	}
	return smx509.ParseCertificate(c.raw)
}

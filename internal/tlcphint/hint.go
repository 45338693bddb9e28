// Package tlcphint explains a failed TLCP client handshake in one
// sentence that names the setting to change: which client profile to try,
// whether the server asked for a client certificate, which certificate or
// CA to check. `gmgate probe` and the tlcp:// upstreams report the same
// failures, so they share these words; each passes the names its user
// knows (flags or configuration fields).
//
// It must not import any gmgate package but tlcp, and a hint never holds
// a secret: it speaks of settings, never of their values.
package tlcphint

import (
	"errors"
	"io"
	"syscall"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
)

// ProfileAuto is the choice of a client that tries the standard profile
// and, when the server refuses its answer to a CertificateRequest
// (ProfileRefused), the gmssl profile. Facts of a handshake whose every
// profile was refused carry it.
const ProfileAuto = "auto"

// Facts are what the client saw during one handshake, recorded by the
// hooks Record installs.
type Facts struct {
	// Profile is the client profile of the handshake ("" is standard;
	// ProfileAuto when both were tried and refused).
	Profile string
	// ServerCertificates reports that the server's certificates arrived
	// and were accepted: the server answered the ClientHello.
	ServerCertificates bool
	// CertificateRequested reports that the server asked for a client
	// certificate; ECDHE that the suite it chose is an ECDHE suite.
	CertificateRequested bool
	ECDHE                bool
	// ClientCert reports that the client had a certificate to give.
	ClientCert bool
}

// Names are how the caller's user spells the settings a hint names.
type Names struct {
	// Profile spells "use this profile": "--profile gmssl" or
	// "profile: gmssl".
	Profile func(name string) string
	// Cert names the client's signing certificate, EncCert its
	// encryption certificate.
	Cert, EncCert string
}

// Record returns a copy of cfg whose hooks fill in the returned Facts
// during one handshake. Use the copy for one connection only.
func Record(cfg *tlcp.Config, profile string) (*tlcp.Config, *Facts) {
	f := &Facts{Profile: profile, ClientCert: len(cfg.Certificates) > 0 || cfg.GetClientCertificate != nil}
	c := cfg.Clone()
	verify := cfg.VerifyPeerCertificate
	c.VerifyPeerCertificate = func(raw [][]byte, chains [][]*smx509.Certificate) error {
		f.ServerCertificates = true
		if verify != nil {
			return verify(raw, chains)
		}
		return nil
	}
	// The client offers the ECDHE suites with a callback only when the
	// suites were chosen explicitly, and without a certificate not at all:
	// a callback that only records must not change the offer, so without
	// a certificate the ECDHE suites are left out here (and a list of
	// ECDHE suites alone is left to fail as it would).
	if cfg.GetClientCertificate == nil && len(cfg.Certificates) == 0 && cfg.CipherSuites != nil {
		var ecc []uint16
		for _, id := range cfg.CipherSuites {
			if !isECDHE(id) {
				ecc = append(ecc, id)
			}
		}
		if len(ecc) == 0 {
			return c, f
		}
		c.CipherSuites = ecc
	}
	get, own := cfg.GetClientCertificate, cfg.Certificates
	c.GetClientCertificate = func(info *tlcp.CertificateRequestInfo) (*tlcp.Certificate, error) {
		f.CertificateRequested = true
		f.ECDHE = isECDHE(info.CipherSuite)
		if get != nil {
			return get(info)
		}
		if len(own) > 0 {
			return &own[0], nil
		}
		return nil, nil
	}
	return c, f
}

// Hint explains err, the error of a client handshake that saw f; "" when
// the error says enough by itself.
func Hint(err error, f Facts, n Names) string {
	if err == nil {
		return ""
	}
	profile := f.Profile
	if profile == "" {
		profile = tlcp.ProfileStandard
	}
	var ae *tlcp.AlertError
	remote := errors.As(err, &ae) && ae.Remote
	closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	if remote && ae.Alert == tlcp.AlertProtocolVersion {
		return "the server refused TLCP 1.1; it may speak TLS only"
	}
	if !remote && !closed {
		// A local error (a certificate that did not verify, a suite
		// without a key) says what is wrong itself.
		return ""
	}
	// GmSSL 3 takes the ECDHE suites only when it has a CA file for
	// client certificates, and answers internal_error without one,
	// whatever the profile.
	gmsslNoCA := ""
	if f.ECDHE && remote && ae.Alert == tlcp.AlertInternalError {
		gmsslNoCA = "; a GmSSL server without a CA file answers the ECDHE suites with internal_error: offer the ECC suites"
	}
	switch {
	case !f.ServerCertificates:
		// The ClientHello was refused; what it carried is the caller's
		// to explain (extensions, suites).
		return ""
	case f.CertificateRequested && !f.ClientCert:
		return "the server asked for a client certificate and none was given: give " + n.Cert + " (and " + n.EncCert + " for the ECDHE suites)"
	case f.CertificateRequested && profile == ProfileAuto:
		return "the server asked for a client certificate and refused the answers of both profiles (standard and gmssl): check that it trusts the issuer of " + n.Cert + gmsslNoCA
	case f.CertificateRequested && profile == tlcp.ProfileGmSSL:
		return "the server asked for a client certificate and refused the answer of profile gmssl, which only GmSSL 3 servers take: for Tongsuo, gotlcp, gmgate and most servers use " + n.Profile(tlcp.ProfileStandard) + "; for a GmSSL server check that it trusts the issuer of " + n.Cert + gmsslNoCA
	case f.CertificateRequested:
		return "the server asked for a client certificate and refused the answer of profile standard: check that it trusts the issuer of " + n.Cert + "; a GmSSL 3 server needs " + n.Profile(tlcp.ProfileGmSSL) + gmsslNoCA
	}
	return "the server refused the key exchange without asking for a client certificate, so the profile plays no part: its encryption certificate may not belong to its encryption key"
}

// ProfileRefused reports whether err, the error of a client handshake
// that saw f, is the server refusing the client's answer to its
// CertificateRequest (an alert, or a close without one, as a GmSSL 3
// server answers a CertificateVerify of the standard form): the one
// failure the other client profile may avoid. Without a request, or
// without a certificate to give, both profiles send the same.
func ProfileRefused(err error, f Facts) bool {
	if err == nil || !f.ServerCertificates || !f.CertificateRequested || !f.ClientCert {
		return false
	}
	var ae *tlcp.AlertError
	if errors.As(err, &ae) {
		return ae.Remote && ae.Alert != tlcp.AlertProtocolVersion
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isECDHE(id uint16) bool {
	for _, s := range tlcp.CipherSuites() {
		if s.ID == id {
			return s.ECDHE
		}
	}
	return false
}

package tlcp

import (
	"fmt"
	"strings"
)

// Client profiles name the client's wire choices for a family of peers.
// Deployed servers disagree on three points of the client's side of a
// mutually authenticated handshake, and no single choice satisfies all
// of them (see the package documentation).
const (
	// ProfileStandard is what Tongsuo, gotlcp, Kona and this package's
	// server accept: with the ECC suites the client sends both its
	// certificates, the ECDHE ClientKeyExchange is the bare 69-byte
	// point, and CertificateVerify signs the SM3 hash of the handshake.
	ProfileStandard = "standard"
	// ProfileGmSSL is what GmSSL 3 servers accept when they ask for a
	// client certificate: the signing certificate alone with the ECC
	// suites (ClientSignCertOnly), the ECDHE ClientKeyExchange with a
	// two-byte length prefix (ClientECDHEParamsAsVector), and
	// CertificateVerify signed over the handshake messages themselves
	// (ClientRawCertificateVerify).
	ProfileGmSSL = "gmssl"
)

// ClientProfiles lists the profile names SetClientProfile knows.
var ClientProfiles = []string{ProfileStandard, ProfileGmSSL}

// SetClientProfile sets the client's wire switches (ClientSignCertOnly,
// ClientECDHEParamsAsVector, ClientRawCertificateVerify) for the named
// profile; "" is ProfileStandard.
func (c *Config) SetClientProfile(name string) error {
	switch name {
	case "", ProfileStandard:
		c.ClientSignCertOnly = false
		c.ClientECDHEParamsAsVector = false
		c.ClientRawCertificateVerify = false
	case ProfileGmSSL:
		c.ClientSignCertOnly = true
		c.ClientECDHEParamsAsVector = true
		c.ClientRawCertificateVerify = true
	default:
		return fmt.Errorf("unknown client profile %q (known: %s)", name, strings.Join(ClientProfiles, ", "))
	}
	return nil
}

package tls13

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"hash"
	"net"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// Contexts of CertificateVerify signatures (RFC 8446 §4.4.3).
const (
	serverSignatureContext = "TLS 1.3, server CertificateVerify\x00"
	clientSignatureContext = "TLS 1.3, client CertificateVerify\x00"
)

// signedContent is what a CertificateVerify signs: 64 spaces, the
// context string and the transcript hash.
func signedContent(context string, transcript hash.Hash) []byte {
	out := make([]byte, 0, 64+len(context)+hashLen)
	for range 64 {
		out = append(out, ' ')
	}
	out = append(out, context...)
	return transcript.Sum(out)
}

// signCertificateVerify signs the transcript with cert's key.
func (c *Config) signCertificateVerify(cert *Certificate, context string, transcript hash.Hash) (*certificateVerifyMsg, error) {
	content := signedContent(context, transcript)
	sig, err := cert.PrivateKey.Sign(c.rand(), content, sm2.NewSM2SignerOption(true, c.signatureID()))
	if err != nil {
		return nil, fmt.Errorf("signing CertificateVerify: %w", err)
	}
	return &certificateVerifyMsg{scheme: SM2SigSM3, signature: sig}, nil
}

// verifyCertificateVerify checks a peer's CertificateVerify.
func (c *Config) verifyCertificateVerify(leaf *smx509.Certificate, m *certificateVerifyMsg, context string, transcript hash.Hash) error {
	if m.scheme != SM2SigSM3 {
		return fmt.Errorf("CertificateVerify with signature scheme %#04x, not sm2sig_sm3", m.scheme)
	}
	pub, err := sm2PublicKey(leaf)
	if err != nil {
		return err
	}
	if !sm2.VerifyASN1WithSM2(pub, c.signatureID(), signedContent(context, transcript), m.signature) {
		return errors.New("CertificateVerify signature does not verify")
	}
	return nil
}

func sm2PublicKey(cert *smx509.Certificate) (*ecdsa.PublicKey, error) {
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != sm2.P256() {
		return nil, fmt.Errorf("certificate %q has no SM2 key", cert.Subject)
	}
	return pub, nil
}

func parseCertificates(list [][]byte) ([]*smx509.Certificate, error) {
	certs := make([]*smx509.Certificate, len(list))
	for i, der := range list {
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		certs[i] = c
	}
	return certs, nil
}

// Extended key usages accepted on peer certificates.
var (
	serverAuthUsages        = []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
	clientAuthUsages        = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}
	lenientClientAuthUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth, smx509.ExtKeyUsageServerAuth}
)

// verifyChain verifies certs[0] as a leaf under roots, with the other
// certificates as intermediates.
func verifyChain(certs []*smx509.Certificate, roots *smx509.CertPool, host string, now time.Time, usages []smx509.ExtKeyUsage) ([][]*smx509.Certificate, error) {
	inter := smx509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	return certs[0].Verify(smx509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		DNSName:       host,
		KeyUsages:     usages,
	})
}

// checkLeafUsage makes sure a peer's leaf may sign: an SM2 key with the
// digitalSignature key usage (or none).
func checkLeafUsage(leaf *smx509.Certificate) error {
	if _, err := sm2PublicKey(leaf); err != nil {
		return err
	}
	if leaf.KeyUsage != 0 && leaf.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("certificate %q lacks the digitalSignature key usage", leaf.Subject)
	}
	return nil
}

func (c *Config) clientCertUsages() []smx509.ExtKeyUsage {
	if c.AcceptServerAuthClientCerts {
		return lenientClientAuthUsages
	}
	return clientAuthUsages
}

// certificateAlert chooses the alert for a verification error.
func certificateAlert(err error) Alert {
	var unknownAuthority smx509.UnknownAuthorityError
	var invalid smx509.CertificateInvalidError
	var hostname smx509.HostnameError
	switch {
	case errors.As(err, &unknownAuthority):
		return AlertUnknownCA
	case errors.As(err, &hostname):
		return AlertBadCertificate
	case errors.As(err, &invalid):
		switch invalid.Reason {
		case smx509.Expired:
			return AlertCertificateExpired
		case smx509.IncompatibleUsage:
			return AlertUnsupportedCertificate
		}
	}
	return AlertBadCertificate
}

func validAt(c *smx509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// hostnameForVerify strips a port and brackets.
func hostnameForVerify(name string) string {
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	return strings.TrimSuffix(strings.Trim(name, "[]"), ".")
}

// leaf returns the parsed leaf of a certificate.
func (cert *Certificate) leaf() (*smx509.Certificate, error) {
	if cert.Leaf != nil {
		return cert.Leaf, nil
	}
	if len(cert.Certificate) == 0 {
		return nil, errNoCertificates
	}
	return smx509.ParseCertificate(cert.Certificate[0])
}

package tlcp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// certCache keeps parsed certificates by the SHA-256 of their DER bytes: a
// client talking to the same servers, or a server resuming the sessions of
// the same clients, parses each certificate once. It is bounded in entries
// and in bytes, and holds only certificates of a usual size; when full it
// starts over.
var certCache = struct {
	sync.Mutex
	m     map[[sha256.Size]byte]*smx509.Certificate
	bytes int
}{m: make(map[[sha256.Size]byte]*smx509.Certificate)}

const (
	certCacheSize  = 1024
	certCacheBytes = 1 << 20
	// maxCachedCert is the largest certificate the cache keeps; larger
	// ones (which anyone can make up) are parsed every time.
	maxCachedCert = 4 << 10
)

// parseCertificate parses der, which it does not keep: the certificate
// refers to a copy of its own, so that it never holds on to the handshake
// message der came in.
func parseCertificate(der []byte) (*smx509.Certificate, error) {
	if len(der) > maxCachedCert {
		return smx509.ParseCertificate(ownCopy(der))
	}
	sum := sha256.Sum256(der)
	certCache.Lock()
	c, ok := certCache.m[sum]
	certCache.Unlock()
	if ok && bytes.Equal(c.Raw, der) {
		return c, nil
	}
	c, err := smx509.ParseCertificate(ownCopy(der))
	if err != nil {
		return nil, err
	}
	certCache.Lock()
	if len(certCache.m) >= certCacheSize || certCache.bytes+len(der) > certCacheBytes {
		clear(certCache.m)
		certCache.bytes = 0
	}
	if _, ok := certCache.m[sum]; !ok {
		certCache.m[sum] = c
		certCache.bytes += len(der)
	}
	certCache.Unlock()
	return c, nil
}

// ownCopy returns a copy of b in a buffer of exactly its size.
func ownCopy(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

func parseCertificates(list [][]byte) ([]*smx509.Certificate, error) {
	certs := make([]*smx509.Certificate, len(list))
	for i, der := range list {
		c, err := parseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		certs[i] = c
	}
	return certs, nil
}

const (
	// encipherUsages let a key receive an encrypted pre-master secret
	// (the ECC suites).
	encipherUsages = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment
	// encKeyUsages are those of an encryption certificate in any suite:
	// the ECDHE suites use the key for SM2 key agreement.
	encKeyUsages = encipherUsages | smx509.KeyUsageKeyAgreement
)

// checkKeyUsages checks the roles of a peer's signing and encryption
// certificates: SM2 keys, digitalSignature on the first, an encipherment or
// key-agreement usage on the second. When the encryption key receives the
// pre-master secret (keyTransport, the ECC suites), keyAgreement alone is
// not enough: it must allow encipherment. An absent KeyUsage extension
// permits everything.
func checkKeyUsages(sign, enc *smx509.Certificate, keyTransport bool) error {
	if _, err := sm2PublicKey(sign.PublicKey); err != nil {
		return fmt.Errorf("signing certificate %q: %w", sign.Subject, err)
	}
	if sign.KeyUsage != 0 && sign.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("signing certificate %q lacks the digitalSignature key usage", sign.Subject)
	}
	if enc == nil {
		return nil
	}
	if _, err := sm2PublicKey(enc.PublicKey); err != nil {
		return fmt.Errorf("encryption certificate %q: %w", enc.Subject, err)
	}
	if enc.KeyUsage != 0 && enc.KeyUsage&encKeyUsages == 0 {
		return fmt.Errorf("encryption certificate %q has none of the keyEncipherment, dataEncipherment or keyAgreement key usages", enc.Subject)
	}
	if keyTransport && enc.KeyUsage != 0 && enc.KeyUsage&encipherUsages == 0 {
		return fmt.Errorf("encryption certificate %q allows only key agreement, which the ECDHE suites use; the ECC suites encrypt the pre-master secret to it and need keyEncipherment or dataEncipherment", enc.Subject)
	}
	return nil
}

// Extended key usages accepted on peer certificates (a certificate
// without the extension, or with anyExtendedKeyUsage, passes too).
var (
	serverAuthUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
	clientAuthUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}
	// lenientClientAuthUsages also let serverAuth-only certificates
	// through, as some GM CAs issue client certificates with serverAuth
	// alone (Config.AcceptServerAuthClientCerts).
	lenientClientAuthUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth, smx509.ExtKeyUsageServerAuth}
)

// clientCertUsages are the extended key usages a client certificate must
// allow under c.
func (c *Config) clientCertUsages() []smx509.ExtKeyUsage {
	if c.AcceptServerAuthClientCerts {
		return lenientClientAuthUsages
	}
	return clientAuthUsages
}

// verifyPeerChains verifies the signing certificate (against host, when
// given) and the encryption certificate, when there is one, as leaves
// under roots. The encryption certificate is checked against host only
// when it carries names of its own.
func verifyPeerChains(sign, enc *smx509.Certificate, intermediates []*smx509.Certificate, roots *smx509.CertPool, host string, now time.Time, usages []smx509.ExtKeyUsage) ([][]*smx509.Certificate, error) {
	inter := smx509.NewCertPool()
	for _, c := range intermediates {
		inter.AddCert(c)
	}
	opts := smx509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		DNSName:       host,
		KeyUsages:     usages,
	}
	chains, err := sign.Verify(opts)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	if enc != nil {
		if len(enc.DNSNames) == 0 && len(enc.IPAddresses) == 0 {
			opts.DNSName = ""
		}
		if _, err := enc.Verify(opts); err != nil {
			return nil, fmt.Errorf("encryption certificate: %w", err)
		}
	}
	return chains, nil
}

// validAt reports whether now is within c's validity period.
func validAt(c *smx509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// chainValidAt reports whether a chain verified earlier still holds at now
// under roots: every certificate is within its validity period and the
// last one is still trusted (a lookup when it is in roots; nil roots are
// the system's).
func chainValidAt(chain []*smx509.Certificate, roots *smx509.CertPool, now time.Time) bool {
	if len(chain) == 0 {
		return false
	}
	for _, c := range chain {
		if !validAt(c, now) {
			return false
		}
	}
	_, err := chain[len(chain)-1].Verify(smx509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageAny}})
	return err == nil
}

// certificateAlert chooses the alert for a certificate verification error.
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

// hostnameForVerify strips a port and brackets; an IP literal is checked
// against IP SANs by smx509.
func hostnameForVerify(name string) string {
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	return strings.TrimSuffix(strings.Trim(name, "[]"), ".")
}

// leafSM2Key returns the SM2 public key of a parsed certificate.
func leafSM2Key(c *smx509.Certificate) (*ecdsa.PublicKey, error) {
	return sm2PublicKey(c.PublicKey)
}

// Package testpki is an SM2 certificate authority for tests: it issues the
// signing and encryption certificates of TLCP, as DER, for keys it
// generates or for keys a test brings.
//
// It is for tests only. It imports nothing but the standard library and
// gmsm, so the internal tests of any package in the module can use it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509/pkix"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// CA is a self-signed SM2 certificate authority.
type CA struct {
	Cert  *smx509.Certificate
	Key   *sm2.PrivateKey
	Roots *smx509.CertPool // holds Cert alone
}

var serialCounter atomic.Int64

// serial returns a serial number that no other certificate of this test
// binary has.
func serial() *big.Int {
	return big.NewInt(0x10000000 + serialCounter.Add(1))
}

// NewCA returns a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := smx509.NewCertPool()
	roots.AddCert(cert)
	return &CA{Cert: cert, Key: key, Roots: roots}
}

// Template returns the template of a leaf certificate for the common name
// cn and the DNS names dns, valid from an hour ago for a day, for server
// and client authentication. Its key usages are those of a TLCP signing
// certificate or, with enc, of an encryption certificate.
func Template(cn string, dns []string, enc bool) *smx509.Certificate {
	ku := smx509.KeyUsageDigitalSignature
	if enc {
		ku = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	}
	return &smx509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dns,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     ku,
		ExtKeyUsage:  []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth, smx509.ExtKeyUsageClientAuth},
	}
}

// Issue signs tmpl for pub and returns the DER certificate.
func (ca *CA) Issue(t testing.TB, tmpl *smx509.Certificate, pub *ecdsa.PublicKey) []byte {
	t.Helper()
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// Dual is a TLCP certificate pair with its keys.
type Dual struct {
	SignCert, EncCert []byte // DER
	SignKey, EncKey   *sm2.PrivateKey
}

// Adjust changes the templates of a pair before they are signed.
type Adjust func(sign, enc *smx509.Certificate)

// IssueDual generates a signing and an encryption key and issues them the
// certificates of Template(cn, dns, false) and Template(cn, dns, true),
// first changed by adjust if it is not nil.
func (ca *CA) IssueDual(t testing.TB, cn string, dns []string, adjust Adjust) Dual {
	t.Helper()
	sign, enc := Template(cn, dns, false), Template(cn, dns, true)
	if adjust != nil {
		adjust(sign, enc)
	}
	var d Dual
	d.SignCert, d.SignKey = ca.issueKey(t, sign)
	d.EncCert, d.EncKey = ca.issueKey(t, enc)
	return d
}

// issueKey generates a key and issues it the certificate of tmpl.
func (ca *CA) issueKey(t testing.TB, tmpl *smx509.Certificate) ([]byte, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca.Issue(t, tmpl, &key.PublicKey), key
}

// SelfSigned makes a pair of self-signed TLCP certificates for cn with
// fresh keys, valid from an hour ago for two hours, first changed by
// adjust if it is not nil: what any client can make up.
func SelfSigned(t testing.TB, cn string, adjust Adjust) Dual {
	t.Helper()
	sign, enc := Template(cn, nil, false), Template(cn, nil, true)
	for _, c := range []*smx509.Certificate{sign, enc} {
		c.NotAfter = time.Now().Add(time.Hour)
		c.ExtKeyUsage = nil
	}
	if adjust != nil {
		adjust(sign, enc)
	}
	var d Dual
	d.SignCert, d.SignKey = selfSign(t, sign)
	d.EncCert, d.EncKey = selfSign(t, enc)
	return d
}

// selfSign generates a key and signs tmpl with it.
func selfSign(t testing.TB, tmpl *smx509.Certificate) ([]byte, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

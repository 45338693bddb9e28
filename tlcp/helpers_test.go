package tlcp

import (
	"crypto"
	"crypto/rand"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// testPKI is a CA with server and client identities, made once per test
// binary.
type testPKI struct {
	ca      *smx509.Certificate
	caKey   *sm2.PrivateKey
	roots   *smx509.CertPool
	server  Certificate
	client  Certificate
	other   *smx509.CertPool // a pool with an unrelated CA
	otherCA *smx509.Certificate
	otherKy *sm2.PrivateKey
}

var pkiCache atomic.Pointer[testPKI]

func getPKI(t testing.TB) *testPKI {
	if p := pkiCache.Load(); p != nil {
		return p
	}
	p := &testPKI{}
	p.ca, p.caKey = newTestCA(t, "gmgate test CA")
	p.roots = smx509.NewCertPool()
	p.roots.AddCert(p.ca)
	p.server = issueDual(t, p.ca, p.caKey, "server.test", []string{"server.test", "localhost"}, nil)
	p.client = issueDual(t, p.ca, p.caKey, "client.test", nil, nil)
	p.otherCA, p.otherKy = newTestCA(t, "unrelated CA")
	p.other = smx509.NewCertPool()
	p.other.AddCert(p.otherCA)
	pkiCache.Store(p)
	return p
}

var serialCounter atomic.Int64

func nextSerial() *big.Int {
	return big.NewInt(0x10000000 + serialCounter.Add(1))
}

func newTestCA(t testing.TB, name string) (*smx509.Certificate, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber:          nextSerial(),
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
	return cert, key
}

// certOpts adjusts a leaf template before signing.
type certOpts func(sign, enc *smx509.Certificate)

func issueLeaf(t testing.TB, ca *smx509.Certificate, caKey *sm2.PrivateKey, tmpl *smx509.Certificate) ([]byte, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func issueDual(t testing.TB, ca *smx509.Certificate, caKey *sm2.PrivateKey, cn string, dns []string, adjust certOpts) Certificate {
	t.Helper()
	base := func(ku smx509.KeyUsage) *smx509.Certificate {
		return &smx509.Certificate{
			SerialNumber: nextSerial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"gmgate"}},
			DNSNames:     dns,
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     ku,
			ExtKeyUsage:  []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth, smx509.ExtKeyUsageClientAuth},
		}
	}
	sign := base(smx509.KeyUsageDigitalSignature)
	enc := base(smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement)
	if adjust != nil {
		adjust(sign, enc)
	}
	signDER, signKey := issueLeaf(t, ca, caKey, sign)
	encDER, encKey := issueLeaf(t, ca, caKey, enc)
	return Certificate{
		SignCertificate: [][]byte{signDER},
		SignKey:         signKey,
		EncCertificate:  [][]byte{encDER},
		EncKey:          encKey,
	}
}

// countingKey wraps an SM2 key and counts its private-key operations.
type countingKey struct {
	k        *sm2.PrivateKey
	signs    atomic.Int64
	decrypts atomic.Int64
	ecdhs    atomic.Int64
}

func (c *countingKey) Public() crypto.PublicKey { return c.k.Public() }

func (c *countingKey) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	c.signs.Add(1)
	return c.k.Sign(r, msg, opts)
}

func (c *countingKey) Decrypt(r io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	c.decrypts.Add(1)
	return c.k.Decrypt(r, msg, opts)
}

func (c *countingKey) ECDH() (*ecdh.PrivateKey, error) {
	c.ecdhs.Add(1)
	return c.k.ECDH()
}

func (c *countingKey) ops() int64 { return c.signs.Load() + c.decrypts.Load() + c.ecdhs.Load() }

// countingCert returns a copy of cert whose keys count their operations.
func countingCert(cert Certificate) (Certificate, *countingKey, *countingKey) {
	sk := &countingKey{k: cert.SignKey.(*sm2.PrivateKey)}
	ek := &countingKey{k: cert.EncKey.(*sm2.PrivateKey)}
	cert.SignKey, cert.EncKey = sk, ek
	return cert, sk, ek
}

func serverConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{Certificates: []Certificate{p.server}, ClientCAs: p.roots}
}

func clientConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{RootCAs: p.roots, ServerName: "server.test"}
}

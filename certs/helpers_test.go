package certs

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/certs/pki"
)

func TestMain(m *testing.M) {
	// Encrypted keys in tests need not resist brute force.
	pemfile.KeyEncryptionIterations = 1024
	os.Exit(m.Run())
}

// newTestCA makes an SM2 CA for a test.
func newTestCA(t testing.TB, intermediate bool) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(pki.CAOptions{Intermediate: intermediate})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeTestPair issues a pair for names and writes it to dir.
func writeTestPair(t testing.TB, ca *pki.CA, dir, name string, password []byte, dns ...string) pki.DualFiles {
	t.Helper()
	d, err := ca.IssueDual(pki.IssueOptions{DNSNames: dns, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	var enc *pki.KeyEncryption
	if password != nil {
		enc = &pki.KeyEncryption{Password: password}
	}
	f, err := d.Write(dir, name, enc)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeRSAServer writes a self-issued RSA server certificate for dns (as
// an existing deployment would have) and its key into dir.
func writeRSAServer(t testing.TB, dir string, dns ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(0x5eed1234),
		Subject:      pkix.Name{CommonName: dns[0]},
		Issuer:       pkix.Name{CommonName: "Legacy RSA CA"},
		DNSNames:     dns,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

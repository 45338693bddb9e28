package accel

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTLSKeysServeTLS12 opens RSA and ECDSA keys through accel and serves
// TLS 1.2 with them: crypto/tls refuses a crypto.Decrypter whose public key
// is not RSA, so only RSA keys may offer Decrypt.
func TestTLSKeysServeTLS12(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		key         crypto.Signer
		wantDecrypt bool
	}{
		{"ECDSA", ecKey, false},
		{"RSA", rsaKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			der, err := x509.MarshalPKCS8PrivateKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "tls.key")
			if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}
			key, err := Open(context.Background(), "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := key.(crypto.Decrypter); ok != tc.wantDecrypt {
				t.Fatalf("key offers Decrypt: %v, want %v", ok, tc.wantDecrypt)
			}
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "localhost"},
				DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
				KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, tc.key.Public(), tc.key)
			if err != nil {
				t.Fatal(err)
			}
			leaf, _ := x509.ParseCertificate(certDER)
			pool := x509.NewCertPool()
			pool.AddCert(leaf)
			srv, cli := net.Pipe()
			defer srv.Close()
			defer cli.Close()
			errc := make(chan error, 1)
			go func() {
				errc <- tls.Server(srv, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{certDER}, PrivateKey: key}},
					MaxVersion: tls.VersionTLS12}).Handshake()
			}()
			if err := tls.Client(cli, &tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: tls.VersionTLS12}).Handshake(); err != nil {
				t.Fatalf("client: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("server: %v", err)
			}
		})
	}
}

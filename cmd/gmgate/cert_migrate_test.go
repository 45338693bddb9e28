package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
)

// A self-signed certificate marked CA:TRUE without keyCertSign, as
// `openssl req -x509` makes a server certificate, migrates as the server
// certificate it serves as, its common name becoming its DNS name; a
// real CA certificate is refused with the way forward.
func TestCertMigrateSelfSignedCATrue(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(0x7e57), Subject: pkix.Name{CommonName: "www.example.cn"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "site.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	out := mustGmgate(t, dir, "cert", "migrate", "--from", "site.crt", "--ca", "ca", "--out", "sm2")
	for _, want := range []string{"DNS:www.example.cn (the common name", "self-signed and marked CA:TRUE without keyCertSign, as openssl req -x509 makes a server certificate"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	pair, err := certs.LoadTLCP(filepath.Join(dir, "sm2/www.example.cn.sign.crt"), filepath.Join(dir, "sm2/www.example.cn.sign.key"), filepath.Join(dir, "sm2/www.example.cn.enc.crt"), filepath.Join(dir, "sm2/www.example.cn.enc.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.SignLeaf.VerifyHostname("www.example.cn"); err != nil || pair.SignLeaf.IsCA {
		t.Errorf("the new signing certificate: %v, CA %v", err, pair.SignLeaf.IsCA)
	}
	out, code := gmgate(t, dir, "cert", "migrate", "--from", "ca/ca.crt", "--ca", "ca", "--out", "sm2ca")
	if code == 0 || !strings.Contains(out, "is a CA certificate") || !strings.Contains(out, "give the server certificates it issued") || !strings.Contains(out, "run gmgate cert init-ca") {
		t.Errorf("a CA certificate: exit %d\n%s", code, out)
	}
}

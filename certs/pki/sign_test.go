package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
)

// The dual CSRs of NewDualCSR, signed by the CA, make a pair that loads
// and serves with the keys made with the requests.
func TestSignDualCSR(t *testing.T) {
	ca := newTestCA(t, true)
	req, err := NewDualCSR(IssueOptions{DNSNames: []string{"card.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range []*smx509.CertificateRequest{req.SignCSR, req.EncCSR} {
		got, _ := requestedKeyUsage(csr)
		if want := kuOfRequest(t, csr); got != want {
			t.Errorf("requested key usage read as %v, smx509 reads %v", got, want)
		}
	}
	sign, role, err := ca.SignCSR(req.SignCSR, SignOptions{})
	if err != nil || role != RoleSign {
		t.Fatalf("sign: %v %s", err, role)
	}
	enc, role, err := ca.SignCSR(req.EncCSR, SignOptions{})
	if err != nil || role != RoleEnc {
		t.Fatalf("enc: %v %s", err, role)
	}
	if sign.KeyUsage != SignKeyUsage || enc.KeyUsage != EncKeyUsage || sign.BasicConstraintsValid ||
		string(sign.RawSubject) != string(enc.RawSubject) || string(sign.RawIssuer) != string(enc.RawIssuer) || certinfo.SANString(sign) != "DNS:card.example.cn" {
		t.Errorf("pair shape: sign %v, enc %v", sign.KeyUsage, enc.KeyUsage)
	}
	dir := t.TempDir()
	d := &Dual{SignCert: sign, SignKey: req.SignKey, EncCert: enc, EncKey: req.EncKey, Chain: ca.Chain(), Root: ca.Root}
	f, err := d.Write(dir, "card", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := certs.LoadTLCPFiles(files(f), certs.LoadOptions{Roots: []*smx509.Certificate{ca.Root}}); err != nil || len(warnings) > 0 {
		t.Fatalf("load: %v %v", err, warnings)
	}
}

func csrFor(t *testing.T, key any, ku *pkix.Extension) *smx509.CertificateRequest {
	t.Helper()
	tmpl := &smx509.CertificateRequest{Subject: pkix.Name{CommonName: "req.example.cn"}, DNSNames: []string{"req.example.cn"}}
	if ku != nil {
		tmpl.ExtraExtensions = []pkix.Extension{*ku}
	}
	der, err := smx509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := smx509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func TestSignCSRRoles(t *testing.T) {
	ca := newTestCA(t, false)
	sm2Key, _ := sm2.GenerateKey(rand.Reader)
	both, _ := keyUsageExtension(SignKeyUsage | EncKeyUsage)
	encKU, _ := keyUsageExtension(EncKeyUsage)
	// No key usage asked for: --usage decides; without it, an error.
	bare := csrFor(t, sm2Key, nil)
	if _, _, err := ca.SignCSR(bare, SignOptions{}); err == nil || !strings.Contains(err.Error(), "give --usage sign or --usage enc") {
		t.Errorf("bare request: %v", err)
	}
	for _, role := range []string{RoleSign, RoleEnc} {
		c, got, err := ca.SignCSR(bare, SignOptions{Role: role})
		if err != nil || got != role {
			t.Fatalf("--usage %s: %v", role, err)
		}
		if want := map[string]smx509.KeyUsage{RoleSign: SignKeyUsage, RoleEnc: EncKeyUsage}[role]; c.KeyUsage != want {
			t.Errorf("--usage %s: key usage %v", role, c.KeyUsage)
		}
	}
	if _, _, err := ca.SignCSR(csrFor(t, sm2Key, &both), SignOptions{}); err == nil || !strings.Contains(err.Error(), "signing and encryption at once") {
		t.Errorf("both usages: %v", err)
	}
	if _, _, err := ca.SignCSR(csrFor(t, sm2Key, &encKU), SignOptions{Role: RoleSign}); err == nil || !strings.Contains(err.Error(), "not for --usage sign") {
		t.Errorf("contradicting --usage: %v", err)
	}
	// Key and CA of different worlds.
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, _, err := ca.SignCSR(csrFor(t, ecKey, nil), SignOptions{}); err == nil || !strings.Contains(err.Error(), "sign it with an ECDSA or RSA CA") {
		t.Errorf("ECDSA request to an SM2 CA: %v", err)
	}
	ecCA, err := NewCA(CAOptions{KeyAlgorithm: KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ecCA.SignCSR(bare, SignOptions{}); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Errorf("SM2 request to an ECDSA CA: %v", err)
	}
}

// A TLS request (RSA, made with crypto/x509 as any other tool would) from
// an RSA CA becomes a certificate crypto/tls serves and verifies.
func TestSignTLSRequestWithRSACA(t *testing.T) {
	ca, err := NewCA(CAOptions{KeyAlgorithm: KeyRSA2048})
	if err != nil {
		t.Fatal(err)
	}
	if ca.KeyAlgorithm() != KeyRSA2048 || !strings.Contains(ca.Root.Subject.CommonName, "RSA") {
		t.Errorf("RSA CA: %s %q", ca.KeyAlgorithm(), ca.Root.Subject.CommonName)
	}
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "legacy.example.com"}, DNSNames: []string{"legacy.example.com"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	csrFile := filepath.Join(dir, "legacy.csr")
	os.WriteFile(csrFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), 0o644)
	csr, err := ReadCSR(csrFile)
	if err != nil {
		t.Fatal(err)
	}
	c, role, err := ca.SignCSR(csr, SignOptions{})
	if err != nil || role != RoleTLS {
		t.Fatalf("%v %s", err, role)
	}
	if c.KeyUsage != smx509.KeyUsageDigitalSignature|smx509.KeyUsageKeyEncipherment {
		t.Errorf("key usage %v", c.KeyUsage)
	}
	std, _ := x509.ParseCertificate(c.Raw)
	root, _ := x509.ParseCertificate(ca.Root.Raw)
	pool := x509.NewCertPool()
	pool.AddCert(root)
	if _, err := std.Verify(x509.VerifyOptions{Roots: pool, DNSName: "legacy.example.com"}); err != nil {
		t.Fatal(err)
	}
	// A file that is not a request.
	if _, err := ReadCSR(filepath.Join(dir, "nope.csr")); err == nil {
		t.Error("missing file read")
	}
	os.WriteFile(csrFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644)
	if _, err := ReadCSR(csrFile); err == nil || !strings.Contains(err.Error(), "not a CERTIFICATE REQUEST") {
		t.Errorf("certificate as request: %v", err)
	}
}

func TestIssueTLSKeyTypes(t *testing.T) {
	for _, tc := range []struct {
		ca, leaf KeyAlgorithm
		want     string
	}{
		{KeyECDSAP256, "", "ECDSA P-256"},
		{KeyRSA2048, "", "RSA-2048"},
		{KeyECDSAP256, KeyRSA2048, "RSA-2048"},
		{KeyRSA2048, KeyECDSAP384, "ECDSA P-384"},
	} {
		ca, err := NewCA(CAOptions{KeyAlgorithm: tc.ca})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := ca.IssueTLS(IssueOptions{DNSNames: []string{"tls.example.com"}, KeyAlgorithm: tc.leaf})
		if err != nil {
			t.Fatal(err)
		}
		if got := certinfo.DescribePublicKey(leaf.Cert.PublicKey); got != tc.want {
			t.Errorf("%s CA, leaf %q: %s", tc.ca, tc.leaf, got)
		}
		dir := t.TempDir()
		cf, kf, err := leaf.Write(dir, "tls", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := certs.LoadTLS(cf, kf); err != nil {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
	ca, _ := NewCA(CAOptions{KeyAlgorithm: KeyECDSAP256})
	if _, err := ca.IssueTLS(IssueOptions{DNSNames: []string{"x.com"}, KeyAlgorithm: KeySM2}); err == nil {
		t.Error("TLS certificate with an SM2 key")
	}
	if _, err := ca.IssueDual(IssueOptions{DNSNames: []string{"x.com"}}); err == nil || !strings.Contains(err.Error(), "this CA is ecdsa-p256") {
		t.Errorf("pair from an ECDSA CA: %v", err)
	}
	if _, err := ParseKeyAlgorithm("dsa"); err == nil {
		t.Error("unknown key type parsed")
	}
}

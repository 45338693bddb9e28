package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// writeLegacyServer writes a self-issued RSA or ECDSA server certificate
// (as an existing deployment would have) and its key; base names the
// files.
func writeLegacyServer(t testing.TB, dir, base string, key crypto.Signer, subject pkix.Name, dns []string, ips []net.IP, validity time.Duration) (string, string) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(0x5eed1234),
		Subject:      subject,
		Issuer:       pkix.Name{CommonName: "Legacy RSA CA"},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(-time.Hour).Add(validity),
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
	certFile, keyFile := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile
}

func TestMigrate(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		key      crypto.Signer
		subject  pkix.Name
		dns      []string
		ips      []net.IP
		validity time.Duration
		wantDays int
	}{
		{"RSA-2048", rsaKey, pkix.Name{CommonName: "www.example.com", Organization: []string{"Example Ltd"}, Country: []string{"CN"}},
			[]string{"www.example.com", "example.com", "api.example.com"}, []net.IP{net.ParseIP("192.0.2.10")}, 398 * 24 * time.Hour, 398},
		{"ECDSA-P256", ecKey, pkix.Name{CommonName: "shop.example.org", OrganizationalUnit: []string{"Web"}},
			[]string{"shop.example.org", "*.shop.example.org"}, []net.IP{net.ParseIP("2001:db8::1")}, 5000 * 24 * time.Hour, 3653},
	}
	// One clock for the CA and the migration, so that a leaf as long as
	// the CA's own lifetime ends exactly with it.
	fixed := time.Now()
	clock := func() time.Time { return fixed }
	ca, err := NewCA(CAOptions{Validity: MaxValidity, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			certFile, keyFile := writeLegacyServer(t, dir, "old", tc.key, tc.subject, tc.dns, tc.ips, tc.validity)
			old, _ := pemfile.ReadCertificates(certFile)
			out := filepath.Join(dir, "sm2")
			res, err := Migrate(MigrateOptions{From: certFile, Key: keyFile, CA: ca, OutDir: out, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Migrated) != 1 {
				t.Fatalf("migrated %d", len(res.Migrated))
			}
			m := res.Migrated[0]
			for _, c := range []*smx509.Certificate{m.Dual.SignCert, m.Dual.EncCert} {
				if !bytes.Equal(c.RawSubject, old[0].RawSubject) {
					t.Errorf("subject %q, want %q", c.Subject, old[0].Subject)
				}
				if !slices.Equal(c.DNSNames, tc.dns) {
					t.Errorf("DNS names %v, want %v", c.DNSNames, tc.dns)
				}
				if len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(tc.ips[0]) {
					t.Errorf("IPs %v, want %v", c.IPAddresses, tc.ips)
				}
				if !sm2.IsSM2PublicKey(c.PublicKey) {
					t.Errorf("key %s, want SM2", certinfo.DescribePublicKey(c.PublicKey))
				}
				if days := int(c.NotAfter.Sub(c.NotBefore).Hours() / 24); days != tc.wantDays {
					t.Errorf("lifetime %d days, want %d", days, tc.wantDays)
				}
			}
			if m.Dual.SignCert.KeyUsage != SignKeyUsage || m.Dual.EncCert.KeyUsage != EncKeyUsage {
				t.Errorf("usages sign=%s enc=%s", certinfo.KeyUsageString(m.Dual.SignCert.KeyUsage), certinfo.KeyUsageString(m.Dual.EncCert.KeyUsage))
			}
			loaded, err := certs.LoadTLCP(m.Files.SignCert, m.Files.SignKey, m.Files.EncCert, m.Files.EncKey)
			if err != nil {
				t.Fatalf("the migrated pair does not load: %v", err)
			}
			if _, err := loaded.SignLeaf.Verify(smx509.VerifyOptions{Roots: ca.Pool(), DNSName: tc.dns[0]}); err != nil {
				t.Errorf("verify: %v", err)
			}
			if _, err := certs.LoadTLS(certFile, keyFile); err != nil {
				t.Errorf("the old certificate no longer loads for TLS: %v", err)
			}
			var report bytes.Buffer
			res.WriteReport(&report)
			wantAll(t, report.String(), certinfo.DescribePublicKey(tc.key.Public())+" ", "SM2 (sign) + SM2 (enc)", "same (byte for byte)", m.Files.SignCert, "keep serving "+certFile)
		})
	}
}

func TestMigrateDirectoryAndCSR(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writeLegacyServer(t, dir, "a", rsaKey, pkix.Name{CommonName: "a.example.com"}, []string{"a.example.com", "www.a.example.com"}, nil, 365*24*time.Hour)
	writeLegacyServer(t, dir, "b", ecKey, pkix.Name{CommonName: "b.example.com"}, []string{"b.example.com", "m.b.example.com"}, nil, 365*24*time.Hour)
	ca := newTestCA(t, false)
	pemfile.WriteCertFile(filepath.Join(dir, "ca.pem"), ca.Root)
	os.WriteFile(filepath.Join(dir, "notes.pem"), []byte("not a certificate"), 0o644)

	out := filepath.Join(t.TempDir(), "csr")
	res, err := Migrate(MigrateOptions{From: dir, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Migrated) != 2 {
		t.Fatalf("migrated %d, skipped %v", len(res.Migrated), res.Skipped)
	}
	if !strings.Contains(res.Skipped[filepath.Join(dir, "ca.pem")], "CA certificate") || !strings.Contains(res.Skipped[filepath.Join(dir, "notes.pem")], "not a PEM certificate") {
		t.Errorf("skipped = %v", res.Skipped)
	}
	for _, m := range res.Migrated {
		if m.OldKey == "" {
			t.Errorf("%s: the key beside it was not checked", m.Source)
		}
		for _, p := range []string{m.CSRFiles.SignCSR, m.CSRFiles.EncCSR} {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			csr, err := smx509.ParseCertificateRequestPEM(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := csr.CheckSignature(); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			if !slices.Equal(csr.DNSNames, m.Old.DNSNames) || !bytes.Equal(csr.RawSubject, m.Old.RawSubject) {
				t.Errorf("%s names %v subject %q; want %v %q", p, csr.DNSNames, csr.Subject, m.Old.DNSNames, m.Old.Subject)
			}
			if !sm2.IsSM2PublicKey(csr.PublicKey) {
				t.Errorf("%s: not SM2", p)
			}
			wantKU := SignKeyUsage
			if strings.HasSuffix(p, ".enc.csr") {
				wantKU = EncKeyUsage
			}
			if ku := kuOfRequest(t, csr); ku != wantKU {
				t.Errorf("%s requests %s, want %s", p, certinfo.KeyUsageString(ku), certinfo.KeyUsageString(wantKU))
			}
		}
	}
	// A key that is not the certificate's.
	_, err = Migrate(MigrateOptions{From: filepath.Join(dir, "a.crt"), Key: filepath.Join(dir, "b.key"), OutDir: out})
	if err == nil || !strings.Contains(err.Error(), "does not belong to "+filepath.Join(dir, "a.crt")) {
		t.Fatalf("wrong key: %v", err)
	}
}

// kuOfRequest decodes the KeyUsage extension a CSR asks for by
// issuing a throwaway certificate from it with smx509.
func kuOfRequest(t *testing.T, csr *smx509.CertificateRequest) smx509.KeyUsage {
	t.Helper()
	key, _ := sm2.GenerateKey(rand.Reader)
	tmpl := &smx509.Certificate{SerialNumber: big.NewInt(1 << 40), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), ExtraExtensions: csr.Extensions}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, csr.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c.KeyUsage
}

// Migrate does not replace the keys of an earlier run (requests already
// sent to a GM CA, or a pair in service) unless told to, and writes
// nothing when it refuses.
func TestMigrateKeepsExistingFiles(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writeLegacyServer(t, dir, "a", rsaKey, pkix.Name{CommonName: "a.example.com"}, []string{"a.example.com"}, nil, 365*24*time.Hour)
	writeLegacyServer(t, dir, "b", ecKey, pkix.Name{CommonName: "b.example.com"}, []string{"b.example.com"}, nil, 365*24*time.Hour)
	ca := newTestCA(t, false)
	for _, c := range []struct {
		name string
		ca   *CA
		key  func(*MigratedCert) string
	}{
		{"requests", nil, func(m *MigratedCert) string { return m.CSRFiles.SignKey }},
		{"pair", ca, func(m *MigratedCert) string { return m.Files.EncKey }},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			first, err := Migrate(MigrateOptions{From: filepath.Join(dir, "b.crt"), CA: c.ca, OutDir: out})
			if err != nil {
				t.Fatal(err)
			}
			kept := c.key(first.Migrated[0])
			before, _ := os.ReadFile(kept)
			// The directory holds a.crt, not yet migrated, and b.crt.
			_, err = Migrate(MigrateOptions{From: dir, CA: c.ca, OutDir: out})
			if err == nil || !strings.Contains(err.Error(), "b.example.com.") || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("second run: %v", err)
			}
			if after, _ := os.ReadFile(kept); !bytes.Equal(after, before) {
				t.Errorf("%s was replaced", kept)
			}
			if _, err := os.Stat(filepath.Join(out, "a.example.com.sign.key")); err == nil {
				t.Error("a refused run wrote files")
			}
			if _, err := Migrate(MigrateOptions{From: dir, CA: c.ca, OutDir: out, Force: true}); err != nil {
				t.Fatalf("with Force: %v", err)
			}
			if after, _ := os.ReadFile(kept); bytes.Equal(after, before) {
				t.Errorf("with Force, %s was not replaced", kept)
			}
		})
	}
}

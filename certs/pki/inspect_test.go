package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509/pkix"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

func inspectText(t *testing.T, files []string, opts InspectOptions) (string, bool) {
	t.Helper()
	r := Inspect(files, opts)
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String(), r.HasErrors()
}

func TestInspectFlags(t *testing.T) {
	dir := t.TempDir()
	ica := newTestCA(t, true)
	d, err := ica.IssueDual(IssueOptions{DNSNames: []string{"x.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Write(dir, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := []*smx509.Certificate{ica.Root}

	out, bad := inspectText(t, []string{f.SignCert, f.SignKey, f.EncCert, f.EncKey}, InspectOptions{Roots: roots})
	if bad {
		t.Fatalf("a good pair has errors:\n%s", out)
	}
	wantAll(t, out, "SM2 signing certificate", "SM2 encryption certificate", "intermediate CA certificate", "belongs to:", "verified by")

	t.Run("expired and not yet valid", func(t *testing.T) {
		out, bad := inspectText(t, []string{f.SignCert}, InspectOptions{Roots: roots, Now: func() time.Time { return time.Now().Add(2 * 365 * 24 * time.Hour) }})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: expired on")
		out, _ = inspectText(t, []string{f.SignCert}, InspectOptions{Roots: roots, Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		wantAll(t, out, "ERROR: not yet valid")
	})
	t.Run("missing intermediate", func(t *testing.T) {
		leafOnly := filepath.Join(dir, "leaf.crt")
		pemfile.WriteCertFile(leafOnly, d.SignCert)
		out, bad := inspectText(t, []string{leafOnly}, InspectOptions{Roots: roots})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: unknown issuer", `"CN=gmgate local SM2 intermediate CA"`, "if it is an intermediate CA, append its certificate", "the CA given with --ca is not it")
		out, _ = inspectText(t, []string{leafOnly}, InspectOptions{})
		wantAll(t, out, "WARNING: issuer", "give the CA with --ca")
	})
	t.Run("key mismatch", func(t *testing.T) {
		out, bad := inspectText(t, []string{f.SignCert, f.EncKey}, InspectOptions{})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: key/certificate mismatch")
	})
	t.Run("wrong usage", func(t *testing.T) {
		key, _ := sm2.GenerateKey(rand.Reader)
		tmpl := &smx509.Certificate{SerialNumber: d.SignCert.SerialNumber, RawSubject: d.SignCert.RawSubject, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: smx509.KeyUsageCRLSign, ExtKeyUsage: []smx509.ExtKeyUsage{smx509.ExtKeyUsageCodeSigning}}
		issuer, issuerKey, _ := ica.issuer()
		c, err := createCertificate(tmpl, issuer, &key.PublicKey, issuerKey)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "usage.crt")
		pemfile.WriteCertFile(p, c, issuer)
		out, bad := inspectText(t, []string{p}, InspectOptions{Roots: roots})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: wrong usage: key usage cRLSign", "ERROR: wrong usage: extended key usage codeSigning")
	})
	t.Run("encrypted key", func(t *testing.T) {
		g := writeTestPair(t, ica, t.TempDir(), "e", []byte("pw"), "e.example.cn")
		out, _ := inspectText(t, []string{g.EncKey}, InspectOptions{})
		wantAll(t, out, "PBES2, PBKDF2 (hmacWithSM3 1.2.156.10197.1.401.2, 1024 iterations), SM4-CBC", "readable by:       gmgate, GmSSL", "give --key-password-file")
		if bytes.Contains([]byte(out), []byte("WARNING")) {
			t.Errorf("gmgate's own layout flagged:\n%s", out)
		}
		out, bad := inspectText(t, []string{g.EncCert, g.EncKey}, InspectOptions{KeyPassword: []byte("pw")})
		if bad {
			t.Errorf("errors:\n%s", out)
		}
		wantAll(t, out, "belongs to:")
		out, _ = inspectText(t, []string{g.EncKey}, InspectOptions{KeyPassword: []byte("not it")})
		wantAll(t, out, "ERROR: cannot read the key: wrong password")
	})
}

// A self-signed end-entity certificate (CA:FALSE), as peers pin, verifies
// with its own key; it is not a bad signature.
func TestInspectSelfSignedLeaf(t *testing.T) {
	dir := t.TempDir()
	key, _ := sm2.GenerateKey(rand.Reader)
	serial, _ := randomSerial()
	tmpl := &smx509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "pinned.example.cn"}, DNSNames: []string{"pinned.example.cn"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: smx509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: false}
	c, err := createCertificate(tmpl, nil, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "self.crt")
	pemfile.WriteCertFile(p, c)
	out, bad := inspectText(t, []string{p}, InspectOptions{})
	if bad || !strings.Contains(out, "verified by the certificate itself (self-signed)") {
		t.Errorf("self-signed SM2 leaf:\n%s", out)
	}
	// A self-signed certificate whose signature is broken is still found.
	raw := append([]byte{}, c.Raw...)
	raw[len(raw)-1] ^= 1 // the last byte of s
	broken, err := smx509.ParseCertificate(raw)
	if err != nil {
		t.Fatal(err)
	}
	pemfile.WriteCertFile(p, broken)
	if out, bad := inspectText(t, []string{p}, InspectOptions{}); !bad || !strings.Contains(out, "ERROR: bad signature") {
		t.Errorf("broken self-signature:\n%s", out)
	}
}

// The same with a leaf OpenSSL makes and accepts.
func TestInspectSelfSignedLeafFromOpenSSL(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	runOpenSSL(t, bin, dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key",
		"-subj", "/CN=pinned.example.com", "-days", "30", "-out", "leaf.crt",
		"-addext", "basicConstraints=critical,CA:FALSE", "-addext", "keyUsage=critical,digitalSignature", "-addext", "subjectAltName=DNS:pinned.example.com")
	if out := runOpenSSL(t, bin, dir, "verify", "-CAfile", "leaf.crt", "leaf.crt"); !strings.Contains(out, "leaf.crt: OK") {
		t.Fatalf("openssl verify: %s", out)
	}
	files := []string{filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")}
	out, bad := inspectText(t, files, InspectOptions{})
	if bad || !strings.Contains(out, "verified by the certificate itself (self-signed)") {
		t.Errorf("self-signed leaf made by OpenSSL:\n%s", out)
	}
}

// Two pairs from one CA: each signing certificate is compared with its own
// encryption certificate only.
func TestInspectTwoPairsFromOneCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, false)
	a := writeTestPair(t, ca, dir, "a", nil, "a.example.cn")
	b := writeTestPair(t, ca, dir, "b", nil, "b.example.cn")
	out, bad := inspectText(t, []string{a.SignCert, a.EncCert, b.SignCert, b.EncCert}, InspectOptions{Roots: []*smx509.Certificate{ca.Root}})
	if bad || strings.Contains(out, "WARNING") {
		t.Errorf("two good pairs:\n%s", out)
	}
	// A pair whose subjects differ is still flagged.
	c, err := ca.IssueDual(IssueOptions{DNSNames: []string{"c.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ca.IssueDual(IssueOptions{DNSNames: []string{"d.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	signC, encD := filepath.Join(dir, "c.sign.crt"), filepath.Join(dir, "d.enc.crt")
	pemfile.WriteCertFile(signC, c.SignCert)
	pemfile.WriteCertFile(encD, d.EncCert)
	out, _ = inspectText(t, []string{signC, encD}, InspectOptions{})
	wantAll(t, out, "WARNING: the encryption certificate "+encD+" has a different subject", "names other hosts (DNS:d.example.cn)")
	// Next to the good pairs, the odd ones are not compared with them.
	out, _ = inspectText(t, []string{a.SignCert, a.EncCert, b.SignCert, b.EncCert, signC}, InspectOptions{})
	if strings.Contains(out, "WARNING: the encryption") {
		t.Errorf("pairs compared across:\n%s", out)
	}
}

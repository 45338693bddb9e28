package certs

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
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
		writeCertFile(leafOnly, d.SignCert)
		out, bad := inspectText(t, []string{leafOnly}, InspectOptions{Roots: roots})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: missing intermediate", `"CN=gmgate local SM2 intermediate CA"`)
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
		writeCertFile(p, c, issuer)
		out, bad := inspectText(t, []string{p}, InspectOptions{Roots: roots})
		if !bad {
			t.Error("no error")
		}
		wantAll(t, out, "ERROR: wrong usage: key usage cRLSign", "ERROR: wrong usage: extended key usage codeSigning")
	})
	t.Run("encrypted key", func(t *testing.T) {
		g := writeTestPair(t, ica, t.TempDir(), "e", []byte("pw"), "e.example.cn")
		out, _ := inspectText(t, []string{g.EncKey}, InspectOptions{})
		wantAll(t, out, "PBES2, PBKDF2 (hmacWithSM3, 1024 iterations), SM4-CBC", "give --key-password-file")
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

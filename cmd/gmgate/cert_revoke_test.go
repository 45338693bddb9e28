package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/internal/testopenssl"
)

// readCert reads the first certificate of a file in dir.
func readCert(t *testing.T, dir, name string) *smx509.Certificate {
	t.Helper()
	c, err := readLeaf(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The whole loop with gmgate alone: init-ca, issue two client
// certificates, revoke one, make the CRL; the revocation checker then
// refuses the revoked certificate and admits the other, from the PEM
// and the DER CRL, for an SM2 CA (with and without an intermediate) and
// an ECDSA one.
func TestCertRevokeCRLEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		initCA []string
		files  func(stem string) []string
	}{
		{"sm2", nil, func(s string) []string { return []string{s + ".sign.crt", s + ".enc.crt"} }},
		{"sm2 intermediate", []string{"--intermediate"}, func(s string) []string { return []string{s + ".sign.crt", s + ".enc.crt"} }},
		{"ecdsa", []string{"--key-type", "ecdsa-p256"}, func(s string) []string { return []string{s + ".crt"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustGmgate(t, dir, append([]string{"cert", "init-ca", "--out", "ca"}, tc.initCA...)...)
			mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "alice.example.cn", "--out", "clients")
			mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "bob.example.cn", "--out", "clients")
			alice := tc.files(filepath.Join("clients", "alice.example.cn"))
			out := mustGmgate(t, dir, append([]string{"cert", "revoke", "--ca", "ca", "--reason", "keyCompromise"}, alice...)...)
			if !strings.Contains(out, "next: gmgate cert crl --ca ca") {
				t.Errorf("revoke does not say what to do next:\n%s", out)
			}
			out = mustGmgate(t, dir, "cert", "crl", "--ca", "ca")
			if !strings.Contains(out, "CRL number 1") || !strings.Contains(out, "listing "+itoa(len(alice))+" revoked") {
				t.Errorf("crl output:\n%s", out)
			}

			issuerFile := pki.CACertFile
			if len(tc.initCA) > 0 && tc.initCA[0] == "--intermediate" {
				issuerFile = pki.IntermediateCertFile
			}
			issuer := readCert(t, filepath.Join(dir, "ca"), issuerFile)
			for _, crlFile := range []string{"crl.pem", "crl.der"} {
				chk, err := revocation.New(revocation.Options{CRL: &revocation.CRLOptions{
					Sources: []string{filepath.Join(dir, "ca", crlFile)}, Issuers: []*smx509.Certificate{issuer}}})
				if err != nil {
					t.Fatal(err)
				}
				if err := chk.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, f := range alice {
					leaf := readCert(t, dir, f)
					var re *revocation.Error
					err := chk.Verify(context.Background(), [][]*smx509.Certificate{{leaf, issuer}})
					if !errors.As(err, &re) || !re.Revoked() || re.Result.Reason != revocation.ReasonKeyCompromise {
						t.Errorf("%s, %s: %v, want revoked (keyCompromise)", crlFile, f, err)
					}
				}
				for _, f := range tc.files(filepath.Join("clients", "bob.example.cn")) {
					if err := chk.Verify(context.Background(), [][]*smx509.Certificate{{readCert(t, dir, f), issuer}}); err != nil {
						t.Errorf("%s, %s: %v, want good", crlFile, f, err)
					}
				}
			}

			// Revoking again changes nothing; the next CRL has the next number.
			if out, code := gmgate(t, dir, "cert", "revoke", "--ca", "ca", alice[0]); code == 0 || !strings.Contains(out, "already revoked") {
				t.Errorf("second revoke: exit %d\n%s", code, out)
			}
			if out := mustGmgate(t, dir, "cert", "crl", "--ca", "ca", "--days", "7"); !strings.Contains(out, "CRL number 2") {
				t.Errorf("second crl:\n%s", out)
			}
			data, err := os.ReadFile(filepath.Join(dir, "ca", "revoked.json"))
			if err != nil {
				t.Fatal(err)
			}
			var db revokedDB
			if err := json.Unmarshal(data, &db); err != nil || db.CRLNumber != 2 || len(db.Revoked) != len(alice) {
				t.Errorf("revoked.json: %v\n%s", err, data)
			}
		})
	}
}

// OpenSSL 3 parses the SM2 CRL, PEM and DER: SM2-with-SM3, the
// revoked serial, the reason and the CRL number.
func TestCertCRLOpenSSLParses(t *testing.T) {
	bin := testopenssl.Bin(t)
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "alice.example.cn", "--out", "clients")
	mustGmgate(t, dir, "cert", "revoke", "--ca", "ca", "--reason", "superseded", "clients/alice.example.cn.sign.crt")
	mustGmgate(t, dir, "cert", "crl", "--ca", "ca")
	serial := serialText(readCert(t, dir, "clients/alice.example.cn.sign.crt").SerialNumber)
	for _, args := range [][]string{
		{"crl", "-in", "ca/crl.pem", "-noout", "-text"},
		{"crl", "-inform", "DER", "-in", "ca/crl.der", "-noout", "-text"},
	} {
		out := testopenssl.Run(t, bin, dir, args...)
		for _, want := range []string{"Signature Algorithm: SM2-with-SM3", "Serial Number: " + serial, "Superseded", "X509v3 CRL Number", "Issuer: CN = gmgate local SM2 root CA"} {
			if !strings.Contains(out, want) {
				t.Errorf("openssl %s: no %q in\n%s", strings.Join(args, " "), want, out)
			}
		}
	}
}

// revoke refuses a certificate of another CA, a bad serial or reason,
// and a call without anything to revoke; crl refuses a CA directory
// without a CA, naming what to do.
func TestCertRevokeRefusals(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	mustGmgate(t, dir, "cert", "init-ca", "--out", "other")
	mustGmgate(t, dir, "cert", "issue", "--ca", "other", "--dns", "x.example.cn", "--out", "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cert", "revoke", "--ca", "ca", "x/x.example.cn.sign.crt"}, "was not issued by the CA in ca"},
		{[]string{"cert", "revoke", "--ca", "ca", "--serial", "xyz"}, "not a positive hexadecimal"},
		{[]string{"cert", "revoke", "--ca", "ca", "--serial", "01", "--reason", "bored"}, "unknown revocation reason"},
		{[]string{"cert", "revoke", "--ca", "ca"}, "give the certificate files"},
		{[]string{"cert", "crl", "--ca", "nowhere"}, "gmgate cert init-ca --out nowhere"},
		{[]string{"cert", "crl", "--ca", "ca", "--days", "0"}, "--days 0"},
	} {
		out, code := gmgate(t, dir, tc.args...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want an error saying %q:\n%s", strings.Join(tc.args, " "), code, tc.want, out)
		}
	}
	// By serial, as openssl prints it.
	serial := serialText(readCert(t, dir, "x/x.example.cn.sign.crt").SerialNumber)
	mustGmgate(t, dir, "cert", "revoke", "--ca", "other", "--serial", "serial="+serial)
	if out := mustGmgate(t, dir, "cert", "crl", "--ca", "other"); !strings.Contains(out, "listing 1 revoked") {
		t.Errorf("crl after a revoke by serial:\n%s", out)
	}
}

// FuzzRevokedDB feeds the revocation database reader and the serial
// parser arbitrary bytes: no panic, and what they accept can be made
// into a CRL entry.
func FuzzRevokedDB(f *testing.F) {
	f.Add([]byte(`{"crl_number": 3, "revoked": [{"serial": "4A3F0C7D9E21B6C8A5D4F3E2C1B0A998", "revoked_at": "2026-12-07T13:00:00Z", "reason": "keyCompromise", "subject": "CN=alice"}]}`))
	f.Add([]byte(`{"crl_number": 0, "revoked": []}`))
	f.Add([]byte(`{"revoked": [{"serial": "serial=0x01:02", "reason": "unspecified"}]}`))
	f.Add([]byte(`{"crl_number": -1, "extra": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		db, err := parseRevokedDB("revoked.json", data)
		if err != nil {
			return
		}
		for _, e := range db.Revoked {
			n, err := parseSerial(e.Serial)
			if err != nil || n.Sign() <= 0 {
				t.Fatalf("accepted serial %q: %v", e.Serial, err)
			}
			if got, err := parseSerial(serialText(n)); err != nil || got.Cmp(n) != 0 {
				t.Fatalf("serial %q does not survive a round trip: %v", e.Serial, err)
			}
		}
	})
}

package main

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"golang.org/x/crypto/ocsp"
)

// caOf loads a CA made by gmgate cert init-ca, as crypto/x509 sees it.
func (f *revokeFixture) caOf(t *testing.T, dir string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	ca, err := pki.LoadCA(f.path(dir))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(ca.Root.Raw)
	if err != nil {
		t.Fatal(err)
	}
	return cert, ca.RootKey
}

// leafOf reads a certificate issued by gmgate cert issue.
func (f *revokeFixture) leafOf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	c, err := readLeaf(f.path(file))
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.Raw)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// A CRL URL that serves an out-of-date CRL, or stops answering, follows
// the policy: under fail_closed a client its CRL no longer vouches for is
// refused, under fail_open admitted; a URL that fails after a good CRL
// keeps that CRL while it is current. Each state change is logged and in
// gmgate_revocation_sources.
func TestServeCRLURLFollowsPolicy(t *testing.T) {
	f := newRevokeFixture(t)
	caCert, caKey := f.caOf(t, "tls-ca")
	// A CRL of the CA whose nextUpdate passed two hours ago (and its
	// grace, an hour by default, with it).
	expired, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: time.Now().Add(-3 * time.Hour), NextUpdate: time.Now().Add(-2 * time.Hour),
	}, caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	var mode atomic.Value
	mode.Store("expired")
	crls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "expired":
			w.Write(expired)
		case "good":
			b, err := os.ReadFile(f.path("tls-ca/crl.der"))
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Write(b)
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(crls.Close)
	url := crls.URL + "/tls-clients.crl"
	srv := f.serve(t, f.listener("closed", "null", "{crl: ["+url+"]}")+f.listener("open", "null", "{crl: ["+url+"], policy: fail_open}"), "closed", "open")
	closed, open := srv.addrs["closed"], srv.addrs["open"]
	bob := func() *tls.Config { return f.tlsClient(t, "bob", tls.VersionTLS12) }
	alice := func() *tls.Config { return f.tlsClient(t, "alice", tls.VersionTLS12) }

	// Out of date from the start: unknown status.
	_, err = getTLS(closed, bob())
	wantTLSRefused(t, "fail_closed, CRL out of date", err)
	if _, err := getTLS(open, bob()); err != nil {
		t.Errorf("fail_open, CRL out of date: %v", err)
	}
	if n := metricSum(t, srv.admin, "gmgate_revocation_sources", `scope="closed/tls"`, `state="expired"`); n != 1 {
		t.Errorf("sources expired: %v, want 1", n)
	}
	if n := metricSum(t, srv.admin, "gmgate_revocation_refused_total", `scope="closed/tls"`, `status="unknown"`); n != 1 {
		t.Errorf("refused as unknown: %v, want 1", n)
	}
	if n := metricSum(t, srv.admin, "gmgate_revocation_unknown_admitted_total", `scope="open/tls"`); n != 1 {
		t.Errorf("admitted as unknown: %v, want 1", n)
	}
	srv.waitLog(t, `"msg":"revocation source expired","scope":"closed/tls","source":"CRL `+url+`"`)

	// A current CRL that revokes alice; a reload reads it.
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "tls-ca", "tls-ca-certs/alice.example.cn.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "tls-ca")
	mode.Store("good")
	reload(t, srv, 1)
	for _, addr := range []string{closed, open} {
		if _, err := getTLS(addr, bob()); err != nil {
			t.Errorf("%s, current CRL: bob: %v", addr, err)
		}
		_, err := getTLS(addr, alice())
		wantTLSRefused(t, addr+", current CRL: alice", err)
	}

	// The URL fails: the last good CRL, still current, is used.
	mode.Store("down")
	reload(t, srv, 2)
	srv.waitLog(t, `"msg":"revocation source failing","scope":"closed/tls"`)
	if _, err := getTLS(closed, bob()); err != nil {
		t.Errorf("URL down, last CRL current: bob: %v", err)
	}
	_, err = getTLS(closed, alice())
	wantTLSRefused(t, "URL down, last CRL current: alice", err)
	if n := metricSum(t, srv.admin, "gmgate_revocation_sources", `scope="closed/tls"`, `state="failing"`); n != 1 {
		t.Errorf("sources failing: %v, want 1", n)
	}
}

// An OCSP responder that answers revoked refuses the client; good admits
// it. The responder is configured (ocsp: URL) and signs with the CA's
// key.
func TestServeOCSPResponder(t *testing.T) {
	f := newRevokeFixture(t)
	caCert, caKey := f.caOf(t, "tls-ca")
	revoked := f.leafOf(t, "tls-ca-certs/alice.example.cn.crt").SerialNumber
	var asked atomic.Int64
	responder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		req, err := ocsp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tmpl := ocsp.Response{Status: ocsp.Good, SerialNumber: req.SerialNumber, IssuerHash: req.HashAlgorithm,
			ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour)}
		if req.SerialNumber.Cmp(revoked) == 0 {
			tmpl.Status, tmpl.RevokedAt, tmpl.RevocationReason = ocsp.Revoked, time.Now().Add(-time.Hour), ocsp.KeyCompromise
		}
		der, err := ocsp.CreateResponse(caCert, caCert, tmpl, caKey)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		w.Write(der)
	}))
	t.Cleanup(responder.Close)
	srv := f.serve(t, f.listener("edge", "null", "{ocsp: "+responder.URL+"}"), "edge")

	_, err := getTLS(srv.addrs["edge"], f.tlsClient(t, "alice", tls.VersionTLS12))
	wantTLSRefused(t, "OCSP revoked", err)
	for i := 0; i < 2; i++ {
		if _, err := getTLS(srv.addrs["edge"], f.tlsClient(t, "bob", tls.VersionTLS12)); err != nil {
			t.Errorf("OCSP good: %v", err)
		}
	}
	if n := metricSum(t, srv.admin, "gmgate_revocation_refused_total", `scope="edge/tls"`, `status="revoked"`); n != 1 {
		t.Errorf("refused as revoked: %v, want 1", n)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("the responder was asked %d times, want 2 (bob's answer is cached)", n)
	}
	if !strings.Contains(srv.logs.String(), "according to OCSP "+responder.URL) {
		t.Errorf("the refusal's log line does not name the responder:\n%s", srv.logs)
	}
}

// config check (and serve) refuse a CRL file that cannot be read, a CRL
// of a CA that is not the section's, and a URL that is not http(s),
// each at its line; relative CRL paths are the configuration file's.
func TestConfigCheckCRLProblems(t *testing.T) {
	f := newRevokeFixture(t)
	for _, tc := range []struct {
		tlcpRevocation, tlsRevocation string
		want                          []string
	}{
		{"{crl: [missing.crl, tls-ca/crl.pem, sm2-ca/crl.pem]}", "{crl: [tls-ca/crl.der]}", []string{
			"listeners[0].tlcp.client_revocation.crl[0]: CRL file: stat " + f.path("missing.crl") + ": no such file",
			"listeners[0].tlcp.client_revocation.crl[1]: CRL file " + f.path("tls-ca/crl.pem") + `: the CRL's issuer "CN=gmgate local ECDSA root CA" is none of the CAs`,
		}},
		{"{crl: [sm2-ca/crl.pem]}", `{crl: ["ftp://ca.example.cn/x.crl"], ocsp: sometimes}`, []string{
			`listeners[0].tls.client_revocation.crl[0]: the scheme "ftp" is not http or https`,
			`listeners[0].tls.client_revocation.ocsp: unknown value "sometimes"`,
		}},
	} {
		cfg := "admin: {listen: \"127.0.0.1:0\"}\nlisteners:\n" + f.listener("edge", tc.tlcpRevocation, tc.tlsRevocation) +
			fmt.Sprintf("upstreams:\n  app: {targets: [%q]}\n", f.upstream)
		file := f.path("gmgate.yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(cfg, "\n")
		lineOf := func(section string) int {
			for i, l := range lines {
				if strings.Contains(l, "client_revocation: "+section) {
					return i + 1
				}
			}
			t.Fatalf("no %s in the configuration", section)
			return 0
		}
		// Run from elsewhere: paths are the file's.
		for _, args := range [][]string{{"config", "check", "--config", file}, {"serve", "--config", file}} {
			out, code := gmgate(t, t.TempDir(), args...)
			if code == 0 {
				t.Fatalf("gmgate %s accepted the configuration:\n%s", args[0], out)
			}
			for _, want := range tc.want {
				section := tc.tlsRevocation
				if strings.HasPrefix(want, "listeners[0].tlcp") {
					section = tc.tlcpRevocation
				}
				want = fmt.Sprintf("gmgate.yaml:%d: %s", lineOf(section), want)
				if !strings.Contains(out, want) {
					t.Errorf("gmgate %s: no %q in\n%s", args[0], want, out)
				}
			}
			if n := strings.Count(out, "client_revocation"); n != len(tc.want) {
				t.Errorf("gmgate %s: %d problems with client_revocation, want %d:\n%s", args[0], n, len(tc.want), out)
			}
		}
	}
}

// A CRL file past its nextUpdate and grace loads with a warning that
// says what the policy will do and how to make a new one; config check
// passes.
func TestConfigCheckWarnsOfOutOfDateCRL(t *testing.T) {
	f := newRevokeFixture(t)
	caCert, caKey := f.caOf(t, "tls-ca")
	old, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(7), ThisUpdate: time.Now().Add(-3 * time.Hour), NextUpdate: time.Now().Add(-2 * time.Hour),
	}, caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path("old.crl"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "admin: {listen: \"127.0.0.1:0\"}\nlisteners:\n" + f.listener("edge", "null", "{crl: [old.crl]}") +
		fmt.Sprintf("upstreams:\n  app: {targets: [%q]}\n", f.upstream)
	file := f.path("gmgate.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustGmgate(t, f.dir, "config", "check", "--config", file)
	for _, want := range []string{"listeners[0].tls.client_revocation.crl[0]: CRL file " + f.path("old.crl") + ": the CRL expired", "policy fail_closed", "gmgate cert crl --ca DIR"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

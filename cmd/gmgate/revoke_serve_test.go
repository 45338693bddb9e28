package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
)

// revokeFixture is two CAs made with gmgate cert init-ca, an SM2 one for
// the TLCP side and an ECDSA one for the TLS side, each with a server
// certificate for localhost and two client certificates (alice, bob)
// issued by gmgate cert issue, and an upstream.
type revokeFixture struct {
	dir      string
	upstream string
}

func newRevokeFixture(t *testing.T) *revokeFixture {
	t.Helper()
	f := &revokeFixture{dir: t.TempDir()}
	mustGmgate(t, f.dir, "cert", "init-ca", "--out", "sm2-ca")
	mustGmgate(t, f.dir, "cert", "init-ca", "--key-type", "ecdsa-p256", "--out", "tls-ca")
	for _, ca := range []string{"sm2-ca", "tls-ca"} {
		for _, name := range []string{"localhost", "alice.example.cn", "bob.example.cn"} {
			mustGmgate(t, f.dir, "cert", "issue", "--ca", ca, "--dns", name, "--out", ca+"-certs")
		}
		mustGmgate(t, f.dir, "cert", "crl", "--ca", ca) // nothing revoked yet
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	t.Cleanup(up.Close)
	f.upstream = up.URL
	return f
}

func (f *revokeFixture) path(p string) string { return filepath.Join(f.dir, p) }

// listener is the YAML of an auto listener that requires and verifies
// client certificates on both sides, with the given client_revocation
// sections (flow YAML).
func (f *revokeFixture) listener(name, tlcpRevocation, tlsRevocation string) string {
	return fmt.Sprintf(`  - name: %s
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp:
      sign_cert: sm2-ca-certs/localhost.sign.crt
      sign_key: sm2-ca-certs/localhost.sign.key
      enc_cert: sm2-ca-certs/localhost.enc.crt
      enc_key: sm2-ca-certs/localhost.enc.key
      client_auth: require_and_verify
      client_ca: sm2-ca/ca.crt
      client_revocation: %s
    tls:
      cert: tls-ca-certs/localhost.crt
      key: tls-ca-certs/localhost.key
      client_auth: require_and_verify
      client_ca: tls-ca/ca.crt
      client_revocation: %s
    routes: [{upstream: app}]
`, name, tlcpRevocation, tlsRevocation)
}

// serve writes the configuration with listeners and starts gmgate serve.
func (f *revokeFixture) serve(t *testing.T, listeners string, names ...string) *served {
	t.Helper()
	return f.serveUpstreams(t, listeners, fmt.Sprintf("  app: {targets: [%q]}\n", f.upstream), names...)
}

// serveUpstreams is serve with the upstreams section's body.
func (f *revokeFixture) serveUpstreams(t *testing.T, listeners, upstreams string, names ...string) *served {
	t.Helper()
	cfg := "admin: {listen: \"127.0.0.1:0\"}\nlog: {access: \"off\"}\nlisteners:\n" + listeners + "upstreams:\n" + upstreams
	file := f.path("gmgate.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	mustGmgate(t, f.dir, "config", "check", "--config", file)
	cmd := gmgateCommand("serve", "--config", file)
	cmd.Dir = f.dir
	return startServe(t, cmd, names...)
}

// reload sends SIGHUP and waits for the n-th reload.
func reload(t *testing.T, srv *served, n int) {
	t.Helper()
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Count(srv.logs.String(), `"msg":"configuration reloaded"`) >= n })
}

// tlcpClient is a TLCP client of the named client certificate, with a
// session cache of its own.
func (f *revokeFixture) tlcpClient(t *testing.T, who string) *tlcp.Config {
	t.Helper()
	base := f.path("sm2-ca-certs/" + who + ".example.cn")
	cert, err := tlcp.LoadX509KeyPair(base+".sign.crt", base+".sign.key", base+".enc.crt", base+".enc.key")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(f.path("sm2-ca/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{cert}, ServerName: "localhost",
		ClientSessionCache: tlcp.NewLRUClientSessionCache(4, 0)}
	cfg.RootCAs = smx509.NewCertPool()
	cfg.RootCAs.AppendCertsFromPEM(pem)
	return cfg
}

// tlsClient is a TLS client of the named client certificate, with a
// session cache of its own.
func (f *revokeFixture) tlsClient(t *testing.T, who string, version uint16) *tls.Config {
	t.Helper()
	base := f.path("tls-ca-certs/" + who + ".example.cn")
	cert, err := tls.LoadX509KeyPair(base+".crt", base+".key")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(f.path("tls-ca/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ServerName: "localhost", RootCAs: roots,
		MinVersion: version, MaxVersion: version, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
}

// getTLCP connects over TLCP, sends a request and reports whether the
// session was resumed; an error is the handshake's or the request's.
func getTLCP(addr string, cfg *tlcp.Config) (resumed bool, err error) {
	c, err := (&tlcp.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return false, err
	}
	defer c.Close()
	tc := c.(*tlcp.Conn)
	code, body, err := tryRequest(tc, "localhost", "/")
	if err == nil && (code != 200 || body != "hello") {
		err = fmt.Errorf("answered %d %q", code, body)
	}
	return tc.ConnectionState().DidResume, err
}

// getTLS is getTLCP over TLS. Under TLS 1.3 the client's handshake ends
// before the server has checked its certificate, so a refusal comes
// with the request.
func getTLS(addr string, cfg *tls.Config) (resumed bool, err error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return false, err
	}
	defer c.Close()
	code, body, err := tryRequest(c, "localhost", "/")
	if err == nil && (code != 200 || body != "hello") {
		err = fmt.Errorf("answered %d %q", code, body)
	}
	return c.ConnectionState().DidResume, err
}

// wantTLCPAlert fails unless err is the alert a TLCP server sent.
func wantTLCPAlert(t *testing.T, what string, err error, want tlcp.Alert) {
	t.Helper()
	var ae *tlcp.AlertError
	if !errors.As(err, &ae) || !ae.Remote || ae.Alert != want {
		t.Errorf("%s: %v, want the alert %s from the server", what, err, want)
	}
}

// wantTLSRefused fails unless err says the server refused the
// connection: the bad_certificate alert, or under TLS 1.3, where the
// client may be writing its request when the alert comes, the
// connection closed under it (the server's count of the alerts it sent
// is checked apart).
func wantTLSRefused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted, want refused", what)
	} else if !strings.Contains(err.Error(), "bad certificate") && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%s: %v, want the alert bad_certificate from the server", what, err)
	}
}

// A client certificate revoked with gmgate cert revoke and published
// with gmgate cert crl is refused by gmgate serve after a reload, on a
// resumed handshake (the session was made before the revocation) and on
// a full one, over TLCP (certificate_revoked) and TLS 1.2 and 1.3
// (bad_certificate); a certificate not revoked is still served.
func TestServeRefusesRevokedClientCertificate(t *testing.T) {
	f := newRevokeFixture(t)
	srv := f.serve(t, f.listener("edge", "{crl: [sm2-ca/crl.pem]}", "{crl: [tls-ca/crl.der]}"), "edge")
	addr := srv.addrs["edge"]

	aliceTLCP, bobTLCP := f.tlcpClient(t, "alice"), f.tlcpClient(t, "bob")
	alice12, alice13 := f.tlsClient(t, "alice", tls.VersionTLS12), f.tlsClient(t, "alice", tls.VersionTLS13)
	// Sessions made before the revocation, and shown to resume.
	for i, want := range []bool{false, true} {
		if resumed, err := getTLCP(addr, aliceTLCP); err != nil || resumed != want {
			t.Fatalf("TLCP connection %d before the revocation: resumed %v, %v", i, resumed, err)
		}
		for _, cfg := range []*tls.Config{alice12, alice13} {
			if resumed, err := getTLS(addr, cfg); err != nil || resumed != want {
				t.Fatalf("TLS %x connection %d before the revocation: resumed %v, %v", cfg.MaxVersion, i, resumed, err)
			}
		}
	}

	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "sm2-ca", "--reason", "keyCompromise",
		"sm2-ca-certs/alice.example.cn.sign.crt", "sm2-ca-certs/alice.example.cn.enc.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "sm2-ca")
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "tls-ca", "tls-ca-certs/alice.example.cn.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "tls-ca")
	reload(t, srv, 1)

	// Resumed: the client offers its session; refused before the
	// server's Finished.
	_, err := getTLCP(addr, aliceTLCP)
	wantTLCPAlert(t, "TLCP resumption", err, tlcp.AlertCertificateRevoked)
	_, err = getTLCP(addr, aliceTLCP)
	wantTLCPAlert(t, "TLCP full handshake", err, tlcp.AlertCertificateRevoked)
	for _, cfg := range []*tls.Config{alice12, alice13} {
		_, err := getTLS(addr, cfg)
		wantTLSRefused(t, fmt.Sprintf("TLS %x resumption", cfg.MaxVersion), err)
		cfg.ClientSessionCache = nil
		_, err = getTLS(addr, cfg)
		wantTLSRefused(t, fmt.Sprintf("TLS %x full handshake", cfg.MaxVersion), err)
	}
	if _, err := getTLCP(addr, bobTLCP); err != nil {
		t.Errorf("bob over TLCP: %v", err)
	}
	if _, err := getTLS(addr, f.tlsClient(t, "bob", tls.VersionTLS13)); err != nil {
		t.Errorf("bob over TLS: %v", err)
	}

	if n := metricSum(t, srv.admin, "gmgate_revocation_refused_total", `scope="edge/tlcp"`, `status="revoked"`); n != 2 {
		t.Errorf("TLCP refusals counted: %v, want 2", n)
	}
	if n := metricSum(t, srv.admin, "gmgate_revocation_refused_total", `scope="edge/tls"`, `status="revoked"`); n != 4 {
		t.Errorf("TLS refusals counted: %v, want 4", n)
	}
	if n := metricSum(t, srv.admin, "gmgate_handshakes_total", `result="alert_sent_revoked_certificate"`); n != 2 {
		t.Errorf("TLCP handshakes failed with certificate_revoked: %v, want 2", n)
	}
	if n := metricSum(t, srv.admin, "gmgate_handshakes_total", `result="alert_sent_bad_certificate"`); n != 4 {
		t.Errorf("TLS handshakes failed with bad_certificate: %v, want 4", n)
	}
	if !strings.Contains(srv.logs.String(), `was revoked at`) || !strings.Contains(srv.logs.String(), "keyCompromise") {
		t.Errorf("no log line says the certificate was revoked:\n%s", srv.logs)
	}
}

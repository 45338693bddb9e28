//go:build cgo

package main

import (
	"bufio"
	"context"
	"crypto"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// getShangMi makes a request over TLS 1.3 ShangMi with the card setup's
// client identity and returns the handshake's state and the body.
func (s *cardSetup) getShangMi(addr string, cache tls13.ClientSessionCache) (tls13.ConnectionState, string, error) {
	client := tls13.Certificate{Certificate: s.client.SignCertificate, PrivateKey: s.client.SignKey.(crypto.Signer)}
	d := &tls13.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls13.Config{
		RootCAs: s.ca.Roots, ServerName: "localhost", Certificates: []tls13.Certificate{client}, ClientSessionCache: cache,
	}}
	conn, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return tls13.ConnectionState{}, "", err
	}
	defer conn.Close()
	c := conn.(*tls13.Conn)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /card HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); err != nil {
		return c.ConnectionState(), "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c.ConnectionState(), "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return c.ConnectionState(), "", err
	}
	if res.StatusCode != http.StatusOK {
		return c.ConnectionState(), "", fmt.Errorf("status %d: %s", res.StatusCode, body)
	}
	return c.ConnectionState(), string(body), nil
}

// gmgate serve answers a TLS 1.3 ShangMi client on an auto listener with
// the TLCP signing key held on a crypto card: the card signs each full
// handshake's CertificateVerify (with the RFC 8998 ID, which the client
// checks), a resumed handshake asks nothing of it, and client
// authentication follows the tlcp section.
func TestServeShangMiWithCardKey(t *testing.T) {
	s := newCardSetup(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served by the upstream")
	}))
	defer up.Close()
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, tlsKey, err := leaf.Write(s.dir, "tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: card
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp:
      sign_cert: %s
      sign_key: %q
      enc_cert: %s
      enc_key: %q
      client_auth: require_and_verify
      client_ca: %s
    tls: {cert: %s, key: %q}
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, s.signCert, s.ref("sign", s.card.PINFile), s.encCert, s.ref("enc", s.card.PINFile), s.caFile, tlsCert, "file:"+tlsKey, up.URL)
	cfgFile := filepath.Join(s.dir, "shangmi.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, s.command("serve", "-c", cfgFile), "card")
	t.Cleanup(func() {
		_ = srv.cmd.Process.Kill()
		<-srv.exited
	})

	s.fullThenResumed(t, srv)
	if v := adminMetric(t, srv.admin, `gmgate_handshakes_total{protocol="tls1.3-sm",result="ok",site="default",suite="TLS_SM4_GCM_SM3"}`); v != 2 {
		t.Errorf("tls1.3-sm handshakes counted: %v, want 2", v)
	}
}

// gmgate serve answers a TLS 1.3 ShangMi client on a tls listener whose
// site's SM2 identity (tls.sm2) has its key on a crypto card: the card
// signs each full handshake, not a resumed one, and client
// authentication follows the tls section with tls.sm2.client_ca.
func TestServeTLSSM2WithCardKey(t *testing.T) {
	s := newCardSetup(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served by the upstream")
	}))
	defer up.Close()
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: card
    listen: "127.0.0.1:0"
    protocol: tls
    tls:
      client_auth: require_and_verify
      sm2:
        cert: %s
        key: %q
        client_ca: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, s.signCert, s.ref("sign", s.card.PINFile), s.caFile, up.URL)
	cfgFile := filepath.Join(s.dir, "tls-sm2.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, s.command("serve", "-c", cfgFile), "card")

	s.fullThenResumed(t, srv)
}

// fullThenResumed makes a full TLS 1.3 ShangMi handshake with the card
// listener of srv, which the card signs once, then a resumed one, which
// it does not sign.
func (s *cardSetup) fullThenResumed(t *testing.T, srv *served) {
	t.Helper()
	cache := tls13.NewLRUClientSessionCache(4)
	signs := cardOps(t, srv.admin, "sign", "ok")
	st, body, err := s.getShangMi(srv.addrs["card"], cache)
	if err != nil || body != "served by the upstream" || st.DidResume || len(st.PeerCertificates) == 0 {
		t.Fatalf("full handshake: %v (body %q, resumed %v)\n%s", err, body, st.DidResume, srv.logs)
	}
	if n := cardOps(t, srv.admin, "sign", "ok") - signs; n != 1 {
		t.Errorf("card signatures for a full TLS 1.3 ShangMi handshake: %v, want 1", n)
	}
	signs = cardOps(t, srv.admin, "sign", "ok")
	st, body, err = s.getShangMi(srv.addrs["card"], cache)
	if err != nil || body != "served by the upstream" || !st.DidResume {
		t.Fatalf("resumed handshake: %v (body %q, resumed %v)", err, body, st.DidResume)
	}
	if n := cardOps(t, srv.admin, "sign", "ok") - signs; n != 0 {
		t.Errorf("card signatures for a resumed handshake: %v, want 0", n)
	}
}

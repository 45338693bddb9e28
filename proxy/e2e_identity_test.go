package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// identityHeaders are the session headers the identity tests configure.
var identityHeaders = []string{"X-Client-Subject", "X-Client-Serial", "X-Client-Fingerprint", "X-Tlcp-Client-Verified", "X-Tlcp-Resumed"}

// writePEM writes certificates to a PEM file and returns its path.
func writePEM(t testing.TB, path string, ders ...[]byte) string {
	t.Helper()
	var b []byte
	for _, der := range ders {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSignedSM2 is a self-signed TLCP certificate pair for cn: what any
// client can make.
func selfSignedSM2(t testing.TB, cn string) tlcp.Certificate {
	t.Helper()
	d := testpki.SelfSigned(t, cn, nil)
	return tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
}

// freshConnClient is an HTTP client that makes a new TLCP connection for
// every request, offering the session it holds from the last one.
func freshConnClient(t testing.TB, tc *tlcp.Config) *http.Client {
	t.Helper()
	if tc.ClientSessionCache == nil {
		tc.ClientSessionCache = tlcp.NewLRUClientSessionCache(8, 0)
	}
	d := &tlcp.Dialer{Config: tc}
	tr := &http.Transport{DialTLSContext: d.DialContext, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// getHeaders fetches url and returns the identity headers the upstream
// received (absent ones as "").
func getHeaders(client *http.Client, url string) (map[string]string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e echoed
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, h := range identityHeaders {
		got[h] = strings.Join(e.Headers.Values(h), ",")
	}
	return got, nil
}

// runFile serves the configuration file at path with Run until the test
// ends, and returns the running server and the SIGHUP channel.
func runFile(t *testing.T, path string) (*Server, chan<- struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *Server, 1)
	done := make(chan error, 1)
	reload := make(chan struct{})
	go func() {
		done <- Run(ctx, path, reload, Options{Logger: testLogger(t), Started: func(s *Server) { started <- s }})
	}()
	var s *Server
	select {
	case s = <-started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, reload
}

// writeConfig replaces the file at path atomically.
func writeConfig(t *testing.T, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// tlcpListener is a configuration file with one TLCP listener whose tlcp
// section ends with extra and whose session headers name the client.
func tlcpListener(p *testPKI, upstream, extra string) string {
	return fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
%s
    session_headers:
      resumed: X-TLCP-Resumed
      client_subject: X-Client-Subject
      client_serial: X-Client-Serial
      client_fingerprint: X-Client-Fingerprint
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["%s"]}
`, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, extra, upstream)
}

// waitForClientAuth waits until the running configuration has the given
// client_auth and client_ca.
func waitForClientAuth(t *testing.T, s *Server, auth, ca string) {
	t.Helper()
	testwait.For(t, "the reload to "+auth, func() bool {
		tc := s.current().cfg.Listeners[0].TLCP
		return tc.ClientAuth == auth && tc.ClientCA == ca
	})
}

// TestReloadTightensClientAuth drives gmgate serve (Run, a configuration
// file, SIGHUP) through the incident response of tightening client_auth:
// once the reload is in, a client whose certificate the new client_ca
// does not vouch for is refused on its next connection, whether it holds
// a session or not, and only verified certificates ever reach the
// upstream as identity headers.
func TestReloadTightensClientAuth(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	dir := tempDir(t)
	partnerCA, err := pki.NewCA(pki.CAOptions{Subject: pkix.Name{CommonName: "partner CA"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := partnerCA.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "partner-client"}})
	if err != nil {
		t.Fatal(err)
	}
	ownCA := p.dual.CACert
	bothCAs := writePEM(t, filepath.Join(dir, "both.crt"), p.ca.Root.Raw, partnerCA.Root.Raw)
	file := filepath.Join(dir, "gmgate.yaml")
	policy := func(auth, ca string) string {
		s := "      client_auth: " + auth
		if ca != "" {
			s += "\n      client_ca: " + ca
		}
		return tlcpListener(p, up.URL, s)
	}
	writeConfig(t, file, policy("require", ""))
	s, sighup := runFile(t, file)
	url := gatewayURL(s, "/")
	client := freshConnClient(t, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{*pair.Certificate()}})

	// require: the certificate is taken, not verified, so it is no
	// identity.
	for i := 0; i < 2; i++ {
		h, err := getHeaders(client, url)
		if err != nil {
			t.Fatalf("under require, connection %d: %v", i, err)
		}
		if h["X-Client-Subject"] != "" || h["X-Client-Serial"] != "" || h["X-Client-Fingerprint"] != "" || h["X-Tlcp-Client-Verified"] != "false" {
			t.Fatalf("under require the upstream got %v", h)
		}
	}

	// The reload: only our own CA verifies client certificates now.
	writeConfig(t, file, policy("require_and_verify", ownCA))
	sighup <- struct{}{}
	waitForClientAuth(t, s, "require_and_verify", ownCA)
	for i := 0; i < 2; i++ {
		if h, err := getHeaders(client, url); err == nil {
			t.Fatalf("after the reload, connection %d was served: %v", i, h)
		}
	}

	// With a session to resume: the partner CA is trusted, the client
	// gets a session and resumes it...
	writeConfig(t, file, policy("require_and_verify", bothCAs))
	sighup <- struct{}{}
	waitForClientAuth(t, s, "require_and_verify", bothCAs)
	for i, resumed := range []string{"false", "true"} {
		h, err := getHeaders(client, url)
		if err != nil {
			t.Fatalf("partner CA trusted, connection %d: %v", i, err)
		}
		if h["X-Client-Subject"] != "CN=partner-client" || h["X-Tlcp-Client-Verified"] != "true" || h["X-Tlcp-Resumed"] != resumed {
			t.Fatalf("partner CA trusted, connection %d: the upstream got %v", i, h)
		}
	}
	// ...and the partner CA is removed: the session is worth nothing.
	writeConfig(t, file, policy("require_and_verify", ownCA))
	sighup <- struct{}{}
	waitForClientAuth(t, s, "require_and_verify", ownCA)
	if h, err := getHeaders(client, url); err == nil {
		t.Fatalf("after the partner CA was removed, the client was served: %v", h)
	}
}

// TestNoClientIdentityWithoutVerification: under client_auth none the
// ECDHE suites still receive the client's certificates, and anyone can
// make one for CN=admin; the upstream must get no identity from it, nor
// from any certificate that was not verified (TLCP and TLS alike).
func TestNoClientIdentityWithoutVerification(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	dir := tempDir(t)
	admin := selfSignedSM2(t, "admin")

	t.Run("none/ECDHE through serve", func(t *testing.T) {
		file := filepath.Join(dir, "none.yaml")
		writeConfig(t, file, tlcpListener(p, up.URL, "      suites: [ECDHE_SM4_GCM_SM3]\n      client_auth: none"))
		s, _ := runFile(t, file)
		client := freshConnClient(t, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{admin},
			CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3}})
		for i, resumed := range []string{"false", "true"} {
			h, err := getHeaders(client, gatewayURL(s, "/"))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"X-Client-Subject": "", "X-Client-Serial": "", "X-Client-Fingerprint": "", "X-Tlcp-Client-Verified": "false", "X-Tlcp-Resumed": resumed}
			for k, v := range want {
				if h[k] != v {
					t.Errorf("connection %d: upstream header %s = %q, want %q", i, k, h[k], v)
				}
			}
		}
	})

	valid, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "teller-7"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth     string
		cert     tlcp.Certificate
		verified bool
	}{
		{"request", admin, false},
		{"require", admin, false},
		{"verify_if_given", *valid.Certificate(), true},
		{"require_and_verify", *valid.Certificate(), true},
	} {
		t.Run("tlcp/"+tc.auth, func(t *testing.T) {
			cfg := testConfig(p, up.URL)
			l := &cfg.Listeners[0]
			l.TLCP.ClientAuth = tc.auth
			l.TLCP.ClientCA = p.dual.CACert
			l.SessionHeaders.ClientSerial = "X-Client-Serial"
			l.SessionHeaders.ClientFingerprint = "X-Client-Fingerprint"
			config.Defaults(cfg)
			s := startServer(t, cfg, nil)
			client := freshConnClient(t, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{tc.cert}})
			h, err := getHeaders(client, gatewayURL(s, "/"))
			if err != nil {
				t.Fatal(err)
			}
			if got := h["X-Client-Subject"] != ""; got != tc.verified || (h["X-Client-Fingerprint"] != "") != tc.verified {
				t.Fatalf("identity headers %v, want them only for a verified certificate (verified: %v)", h, tc.verified)
			}
			if h["X-Tlcp-Client-Verified"] != fmt.Sprint(tc.verified) {
				t.Fatalf("X-TLCP-Client-Verified = %q, want %v", h["X-Tlcp-Client-Verified"], tc.verified)
			}
			if tc.verified && h["X-Client-Subject"] != "CN=teller-7" {
				t.Fatalf("subject %q", h["X-Client-Subject"])
			}
		})
	}

	// The TLS side: a self-signed certificate under request is no
	// identity; one from the configured client_ca under verify_if_given
	// is.
	clientCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256, Subject: pkix.Name{CommonName: "TLS client CA"}})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := clientCA.IssueTLS(pki.IssueOptions{Subject: pkix.Name{CommonName: "tls-teller"}})
	if err != nil {
		t.Fatal(err)
	}
	validTLS, err := leaf.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	selfTLS := selfSignedECDSA(t, "admin")
	caFile := writePEM(t, filepath.Join(dir, "tls-clients.crt"), clientCA.Root.Raw)
	for _, tc := range []struct {
		auth     string
		cert     tls.Certificate
		verified bool
	}{
		{"request", selfTLS, false},
		{"verify_if_given", *validTLS, true},
	} {
		t.Run("tls/"+tc.auth, func(t *testing.T) {
			cfg := testConfig(p, up.URL)
			l := &cfg.Listeners[0]
			l.TLS.ClientAuth = tc.auth
			l.TLS.ClientCA = caFile
			config.Defaults(cfg)
			s := startServer(t, cfg, nil)
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", Certificates: []tls.Certificate{tc.cert}}}
			t.Cleanup(tr.CloseIdleConnections)
			h, err := getHeaders(&http.Client{Transport: tr}, gatewayURL(s, "/"))
			if err != nil {
				t.Fatal(err)
			}
			if (h["X-Client-Subject"] != "") != tc.verified || h["X-Tlcp-Client-Verified"] != fmt.Sprint(tc.verified) {
				t.Fatalf("upstream got %v, want identity only for a verified certificate (verified: %v)", h, tc.verified)
			}
			if tc.verified && h["X-Client-Subject"] != "CN=tls-teller" {
				t.Fatalf("subject %q", h["X-Client-Subject"])
			}
		})
	}
}

// selfSignedECDSA is a self-signed TLS client certificate for cn.
func selfSignedECDSA(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestSessionCacheSettings: tlcp.session_cache.size 0 turns resumption
// off; the default resumes.
func TestSessionCacheSettings(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	for _, tc := range []struct {
		name   string
		size   *int
		resume bool
	}{
		{"default", nil, true},
		{"off", new(int), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(p, up.URL)
			cfg.Listeners[0].TLCP.SessionCache = &config.SessionCache{Size: tc.size}
			config.Defaults(cfg)
			s := startServer(t, cfg, nil)
			client := freshConnClient(t, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
			var got []string
			for i := 0; i < 2; i++ {
				h, err := getHeaders(client, gatewayURL(s, "/"))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, h["X-Tlcp-Resumed"])
			}
			if want := []string{"false", fmt.Sprint(tc.resume)}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("resumed: %v, want %v", got, want)
			}
		})
	}
}

// TestServerAuthOnlyClientCertificates: a client certificate must allow
// clientAuth unless the listener sets accept_server_auth_client_certs.
func TestServerAuthOnlyClientCertificates(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	ca := testpki.NewCA(t, "legacy GM CA")
	d := ca.IssueDual(t, "legacy-client", nil, func(sign, enc *smx509.Certificate) {
		sign.ExtKeyUsage = []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
		enc.ExtKeyUsage = sign.ExtKeyUsage
	})
	cert := tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
	caFile := writePEM(t, filepath.Join(tempDir(t), "legacy.crt"), ca.Cert.Raw)
	for _, lenient := range []bool{false, true} {
		t.Run(fmt.Sprint("accept_server_auth_client_certs=", lenient), func(t *testing.T) {
			cfg := testConfig(p, up.URL)
			l := &cfg.Listeners[0]
			l.TLCP.ClientAuth = "require_and_verify"
			l.TLCP.ClientCA = caFile
			l.TLCP.AcceptServerAuthClientCerts = lenient
			s := startServer(t, cfg, nil)
			client := freshConnClient(t, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{cert}})
			h, err := getHeaders(client, gatewayURL(s, "/"))
			if lenient && (err != nil || h["X-Client-Subject"] != "CN=legacy-client") {
				t.Fatalf("lenient listener: %v %v", err, h)
			}
			if !lenient && err == nil {
				t.Fatalf("a serverAuth-only client certificate was accepted: %v", h)
			}
		})
	}
}

// forgedIdentity are headers a client writes to pass for another: the
// session header names another listener or site of the configuration
// sets, in their case and '_' variants, and the certificate headers of
// RFC 9440.
var forgedIdentity = []string{
	"X-Tlcp-Client-Subject: CN=teller-1",
	"X_tlcp_client_subject: CN=teller-2",
	"x-TLCP-client-FINGERPRINT: 00ff",
	"X-Tlcp-Client-Verified: true",
	"X_TLCP_CLIENT_VERIFIED: true",
	"X-Site-Serial: 01",
	"Client-Cert: :MIIB:",
	"client_cert_chain: :MIIB:",
	"CLIENT-CERT-CHAIN: :MIIB:",
}

// identityGateway runs, from a configuration file read as gmgate serve
// reads it, a listener "edge" that sends the client's identity in
// session headers, a site of another listener that sends one under
// other names, and listeners "bare" (TLCP) and "local" (plain HTTP) that
// send none, all to one upstream that echoes what it got.
func identityGateway(t *testing.T, upstream string) *Server {
	t.Helper()
	p := getPKI(t)
	id := fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}", p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp: %[1]s
    session_headers: {client_subject: X-Tlcp-Client-Subject, client_fingerprint: X-Tlcp-Client-Fingerprint}
    routes: [{upstream: app}]
  - name: sites
    listen: "127.0.0.1:0"
    sites:
      - name: tellers
        default: true
        tlcp: %[1]s
        session_headers: {client_serial: X-Site-Serial}
        routes: [{upstream: app}]
  - name: bare
    listen: "127.0.0.1:0"
    tlcp: %[1]s
    http2: true
    routes: [{upstream: app}]
  - name: local
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[2]q]}
`, id, upstream)
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, cfg, nil)
}

// sendForged sends a request with the forged identity headers on c and
// returns the headers the upstream received.
func sendForged(c net.Conn, extra ...string) (http.Header, error) {
	req := "GET /whoami HTTP/1.1\r\nHost: localhost\r\nX-Custom: kept\r\n" + strings.Join(append(forgedIdentity, extra...), "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e echoed
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: %v", resp.Status, err)
	}
	return e.Headers, nil
}

// sendForgedH2 sends the forged identity headers in an HTTP/2 request on
// c, which chose h2, and returns the headers the upstream received.
func sendForgedH2(t *testing.T, c net.Conn) http.Header {
	t.Helper()
	fields := []string{":method", "GET", ":scheme", "https", ":authority", "localhost", ":path", "/whoami"}
	for _, f := range forgedIdentity {
		name, value, _ := strings.Cut(f, ":")
		fields = append(fields, strings.ToLower(name), strings.TrimSpace(value))
	}
	status, body := h2Exchange(t, c, fields...)
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s %q: %v", status, body, err)
	}
	return e.Headers
}

// forgedLeft returns the forged identity headers (by their normalised
// name) found in h.
func forgedLeft(h http.Header) []string {
	var left []string
	for k, v := range h {
		for _, f := range forgedIdentity {
			name, _, _ := strings.Cut(f, ":")
			if forward.NormalHeaderName(k) == forward.NormalHeaderName(name) {
				left = append(left, k+": "+strings.Join(v, ","))
				break
			}
		}
	}
	return left
}

// TestIdentityHeadersStrippedEverywhere is item 3 of the second review:
// on listeners that set no session headers, a client's headers named as
// another listener's or site's identity headers (in any case, with '_'
// for '-'), or Client-Cert and Client-Cert-Chain, never reach the
// upstream, which the other listener tells who its clients are under the
// same names.
func TestIdentityHeadersStrippedEverywhere(t *testing.T) {
	up := echoUpstream(t, "app")
	s := identityGateway(t, up.URL)
	p := getPKI(t)
	dial := map[string]func() (net.Conn, error){
		"bare": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("bare").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"local": func() (net.Conn, error) { return net.Dial("tcp", s.Addr("local").String()) },
		"edge": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"sites": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("sites").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
	}
	for name, d := range dial {
		t.Run(name, func(t *testing.T) {
			c, err := d()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			h, err := sendForged(c)
			if err != nil {
				t.Fatal(err)
			}
			if h.Get("X-Custom") != "kept" {
				t.Errorf("an ordinary header was lost: %v", h)
			}
			left := forgedLeft(h)
			// The listeners that send identities tell the upstream
			// that the client sent no verified certificate: only that
			// is left.
			if (name == "edge" || name == "sites") && len(left) == 1 && left[0] == "X-Tlcp-Client-Verified: false" {
				return
			}
			if len(left) != 0 {
				t.Errorf("the upstream got forged identity headers: %q", left)
			}
		})
	}
	t.Run("bare HTTP/2", func(t *testing.T) {
		c := dialTLCPTo(t, s, "bare", "h2")
		if left := forgedLeft(sendForgedH2(t, c)); len(left) != 0 {
			t.Errorf("the upstream got forged identity headers: %q", left)
		}
	})
}

// dialTLCPTo makes a TLCP connection to the named listener, offering
// protos by ALPN.
func dialTLCPTo(t *testing.T, s *Server, listener string, protos ...string) *tlcp.Conn {
	t.Helper()
	c, err := tlcp.Dial("tcp", s.Addr(listener).String(), &tlcp.Config{RootCAs: getPKI(t).roots, ServerName: "localhost", NextProtos: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

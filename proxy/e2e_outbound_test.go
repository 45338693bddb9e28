package proxy

// Client mode end to end: local applications speak plain HTTP or TCP to a
// gateway, which calls a TLCP-only service (a second gateway, or the
// independent tjfoc gmtls server) as a TLCP client with its own identity.

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	tjtls "github.com/tjfoc/gmsm/gmtls"
	tjx509 "github.com/tjfoc/gmsm/x509"
)

// clientIdentity is a TLCP client pair for "legacy-app" from the test CA,
// written to a directory of its own.
func clientIdentity(t testing.TB, p *testPKI) (pki.DualFiles, *pki.Dual) {
	t.Helper()
	return clientIdentityFor(t, p, "legacy-app")
}

func clientIdentityFor(t testing.TB, p *testPKI, cn string) (pki.DualFiles, *pki.Dual) {
	t.Helper()
	pair, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: cn}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := pair.Write(tempDir(t), cn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return files, pair
}

// parseConfig reads a configuration written as a user writes one.
func parseConfig(t testing.TB, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("gmgate.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return cfg
}

// tlcpService is a gateway that serves TLCP only and requires a client
// certificate from the test CA, in front of target (an http:// or tcp://
// URL); its session headers tell the service who the client was.
func tlcpService(t testing.TB, p *testPKI, target string) *Server {
	t.Helper()
	route := "{upstream: app}"
	return startServer(t, parseConfig(t, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
      client_auth: require_and_verify
      client_ca: %s
    session_headers: {client_subject: X-Client-Subject, resumed: X-TLCP-Resumed}
    routes: [%s]
upstreams:
  app: {targets: ["%s"]}
`, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, p.dual.CACert, route, target)), nil)
}

// clientGateway is a gateway with one plain listener "app" (protocol
// http or tcp) on loopback in front of the upstream "partner", whose
// targets and tlcp section are given. Health checks are off unless
// extra sets them; extra is more YAML for the upstream.
func clientGateway(t testing.TB, protocol, targets, tlcpSection, extra string) (*Server, *testlog.Buffer) {
	t.Helper()
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
timeouts: {upstream_connect: 2s}
listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: %s
    routes: [{upstream: partner}]
upstreams:
  partner:
    targets: [%s]
    tlcp:
%s
%s
`, protocol, targets, indent(tlcpSection, "      "), indent(extra, "    "))
	if !strings.Contains(extra, "health:") {
		doc += "    health: {disabled: true}\n"
	}
	return startLogged(t, parseConfig(t, doc), nil)
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// identitySection is a tlcp section that verifies the service as
// localhost and authenticates with the client pair.
func identitySection(p *testPKI, id pki.DualFiles, suite string) string {
	return fmt.Sprintf(`ca: %s
server_name: localhost
sign_cert: %s
sign_key: %s
enc_cert: %s
enc_key: %s
suites: [%s]`, p.dual.CACert, id.SignCert, id.SignKey, id.EncCert, id.EncKey, suite)
}

// counterSum adds the series of a counter family whose labels include
// the given ones.
func counterSum(t testing.TB, s *Server, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := scrape(t, s)[name]
	if !ok {
		return 0
	}
	sum := 0.0
	for _, m := range f.Metric {
		if hasLabels(m, labels) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestOutboundHTTPOverTLCP: a local HTTP client calls a gateway's http
// listener, which forwards over TLCP with mutual authentication to a
// second gateway in front of the service. Keep-alive carries N requests
// over fewer handshakes, and a new connection resumes the session, as
// both gateways' metrics show.
func TestOutboundHTTPOverTLCP(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	for _, suite := range []string{"ECC_SM4_GCM_SM3", "ECC_SM4_CBC_SM3", "ECDHE_SM4_GCM_SM3", "ECDHE_SM4_CBC_SM3"} {
		t.Run(suite, func(t *testing.T) {
			svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
			gw, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, suite), "")
			client := &http.Client{Timeout: 20 * time.Second}
			url := "http://" + gw.Addr("app").String() + "/orders?id=7"

			const n = 10
			for i := range n {
				resp, err := client.Post(url, "text/plain", strings.NewReader(fmt.Sprintf("request %d", i)))
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, resp)
				var e echoed
				if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
				if e.Path != "/orders?id=7" || e.Body != fmt.Sprintf("request %d", i) || e.Upstream != "partner-api" {
					t.Fatalf("the service saw %+v", e)
				}
				// The service's gateway verified the client certificate.
				if got := e.Headers.Get("X-Client-Subject"); got != "CN=legacy-app" {
					t.Fatalf("client subject at the service: %q", got)
				}
			}
			suiteLabel := map[string]string{"upstream": "partner", "suite": suite}
			full := counterSum(t, gw, "gmgate_upstream_handshakes_total", suiteLabel)
			served := counterSum(t, svc, "gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "suite": suite, "result": "ok"})
			if full < 1 || full >= n || served != full {
				t.Fatalf("%d requests over %v handshakes (the service counted %v): keep-alive did not reuse connections", n, full, served)
			}

			// A new connection resumes the session.
			gw.current().pools["partner"].Transport.CloseIdle()
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			var e echoed
			if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil || e.Headers.Get("X-Tlcp-Resumed") != "true" {
				t.Fatalf("after closing the idle connections: resumed header %q (%v)", e.Headers.Get("X-Tlcp-Resumed"), err)
			}
			if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner", "resumed": "true"}); v != 1 {
				t.Errorf("client side: %v resumed handshakes, want 1", v)
			}
			if v := counterSum(t, svc, "gmgate_handshakes_resumed_total", map[string]string{"protocol": "tlcp"}); v != 1 {
				t.Errorf("service side: %v resumed handshakes, want 1", v)
			}
		})
	}
}

// TestOutboundTCPOverTLCP: a local TCP client's connection goes whole
// through a tcp listener and TLCP (mutual authentication) to a second
// gateway, which passes the stream on to the service; half-closes pass
// through.
func TestOutboundTCPOverTLCP(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	upper := testnet.Serve(t, func(c net.Conn) {
		defer c.Close()
		b, _ := io.ReadAll(c)
		_, _ = c.Write([]byte(strings.ToUpper(string(b))))
	})
	svc := tlcpService(t, p, "tcp://"+upper)
	gw, _ := clientGateway(t, "tcp", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, "ECDHE_SM4_GCM_SM3"), "")
	for i := range 3 {
		c, err := net.Dial("tcp", gw.Addr("app").String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		msg := fmt.Sprintf("select %d from partners;", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != strings.ToUpper(msg) {
			t.Fatalf("connection %d: %q, %v", i, got, err)
		}
	}
	// Each connection is a handshake; all but the first resume.
	if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner", "resumed": "true"}); v != 2 {
		t.Errorf("%v resumed handshakes over 3 connections, want 2", v)
	}
	if v := counterSum(t, svc, "gmgate_handshakes_resumed_total", nil); v != 2 {
		t.Errorf("the service gateway counted %v resumed handshakes, want 2", v)
	}
}

// tjfocService is the independent tjfoc gmtls server (suite 0xE013 only)
// requiring a client certificate from the test CA, serving HTTP.
func tjfocService(t *testing.T, p *testPKI) (addr string, requests *atomic.Int64) {
	t.Helper()
	pair := func(certFile, keyFile string) tjtls.Certificate {
		c, err := tjtls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, err := tjx509.ParseCertificate(p.ca.Root.Raw)
	if err != nil {
		t.Fatal(err)
	}
	roots := tjx509.NewCertPool()
	roots.AddCert(ca)
	ln, err := tjtls.Listen("tcp", "127.0.0.1:0", &tjtls.Config{
		GMSupport:              tjtls.NewGMSupport(),
		Certificates:           []tjtls.Certificate{pair(p.dual.SignCert, p.dual.SignKey), pair(p.dual.EncCert, p.dual.EncKey)},
		CipherSuites:           []uint16{tjtls.GMTLS_SM2_WITH_SM4_SM3},
		SessionTicketsDisabled: true,
		ClientAuth:             tjtls.RequireAndVerifyClientCert,
		ClientCAs:              roots,
	})
	if err != nil {
		t.Fatal(err)
	}
	requests = &atomic.Int64{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			subject := ""
			if tc, ok := r.Context().Value(tjfocConnKey{}).(*tjtls.Conn); ok {
				if st := tc.ConnectionState(); len(st.PeerCertificates) > 0 {
					subject = st.PeerCertificates[0].Subject.CommonName
				}
			}
			fmt.Fprintf(w, "tjfoc saw %s %s from %s", r.Method, r.URL.Path, subject)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, tjfocConnKey{}, c)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), requests
}

type tjfocConnKey struct{}

// TestOutboundToTjfocServer: the tlcp:// upstream is the independent
// tjfoc gmtls server with suite 0xE013 (ECC_SM4_CBC_SM3) and client
// authentication; with http2 it is offered ALPN, answers none, and is
// spoken to in HTTP/1.1 over one keep-alive connection.
func TestOutboundToTjfocServer(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	for _, extra := range []string{"", "http2: true"} {
		t.Run(fmt.Sprintf("%q", extra), func(t *testing.T) {
			addr, requests := tjfocService(t, p)
			gw, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+addr), identitySection(p, id, "ECC_SM4_CBC_SM3"), extra)
			client := &http.Client{Timeout: 20 * time.Second}
			for i := range 3 {
				resp, body := get(t, client, fmt.Sprintf("http://%s/partner/%d", gw.Addr("app"), i))
				if want := fmt.Sprintf("tjfoc saw GET /partner/%d from legacy-app", i); resp.StatusCode != http.StatusOK || body != want {
					t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
				}
			}
			if requests.Load() != 3 {
				t.Fatalf("tjfoc served %d requests", requests.Load())
			}
			if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner", "suite": "ECC_SM4_CBC_SM3"}); v != 1 {
				t.Errorf("%v handshakes for 3 requests in a row, want 1", v)
			}
		})
	}
}

// logLine returns the first process log line with msg and the given
// fields.
func logLine(logs *testlog.Buffer, msg string, fields map[string]string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range fields {
			if line[k] != v {
				ok = false
			}
		}
		if ok {
			return line
		}
	}
	return nil
}

// TestOutboundFailures: an upstream whose certificate does not verify,
// one that demands a client certificate the gateway lacks, one that
// speaks TLS, one that speaks plain HTTP, one that never answers and one
// that hangs up after the handshake: each request is answered 502 (504
// when nothing came back within the connect timeout) with the step and
// the reason in the log and in gmgate_upstream_failures_total, and
// nothing waits longer than the timeouts.
func TestOutboundFailures(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	dir := tempDir(t)
	otherCA, err := pki.NewCA(pki.CAOptions{Subject: pkix.Name{CommonName: "some other CA"}})
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := writePEM(t, filepath.Join(dir, "other.crt"), otherCA.Root.Raw)
	svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsServer.Close)
	// A plain HTTP server answers bytes that are no request line with a
	// 400 and closes (net/http does so as soon as the ClientHello holds a
	// newline; otherwise it waits, as "silent" does).
	plainHTTP := testnet.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	})
	silent := silentServer(t)
	hangsUp := hangUpAfterHandshake(t, p)

	for _, tc := range []struct {
		name, target, section string
		status                int
		reason, hint          string
	}{
		{"certificate does not verify", svc.Addr("edge").String(), strings.Replace(identitySection(p, id, "ECC_SM4_GCM_SM3"), p.dual.CACert, otherRoots, 1),
			http.StatusBadGateway, "alert_sent_unknown_certificate_authority", "tlcp.ca"},
		{"client certificate demanded", svc.Addr("edge").String(), "ca: " + p.dual.CACert + "\nserver_name: localhost",
			http.StatusBadGateway, "alert_received_handshake_failure", "sign_cert"},
		{"TLS instead of TLCP", tlsServer.Listener.Addr().String(), "insecure_skip_verify: true",
			http.StatusBadGateway, "alert_received_protocol_version_not_supported", "TLS"},
		{"plain HTTP instead of TLCP", plainHTTP, "insecure_skip_verify: true",
			http.StatusBadGateway, "alert_sent_unexpected_message", ""},
		{"silent", silent, "insecure_skip_verify: true",
			http.StatusGatewayTimeout, "timeout", "timeouts.upstream_connect"},
		{"hangs up after the handshake", hangsUp, "ca: " + p.dual.CACert + "\nserver_name: localhost",
			http.StatusBadGateway, "closed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+tc.target), tc.section, "retries: 0")
			client := &http.Client{Timeout: 20 * time.Second}
			start := time.Now()
			resp, body := get(t, client, "http://"+gw.Addr("app").String()+"/x")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if d := time.Since(start); d > 2*time.Second+5*time.Second {
				t.Errorf("the answer took %s", d)
			}
			stage := "handshake"
			if tc.name == "hangs up after the handshake" {
				stage = "request"
			}
			labels := map[string]string{"upstream": "partner", "stage": stage, "reason": tc.reason}
			if v := counterSum(t, gw, "gmgate_upstream_failures_total", labels); v != 1 {
				mf := scrape(t, gw)["gmgate_upstream_failures_total"]
				t.Errorf("failures %v: %v", labels, mf)
			}
			line := logLine(logs, "upstream failed", map[string]string{"stage": stage, "reason": tc.reason})
			if line == nil || !strings.Contains(fmt.Sprint(line["cause"]), map[string]string{"handshake": "TLCP handshake failed", "request": "request failed"}[stage]) {
				t.Errorf("no log line for the failure:\n%s", logs)
			} else if tc.hint != "" && !strings.Contains(fmt.Sprint(line["hint"]), tc.hint) {
				t.Errorf("the log line's hint %q lacks %q", line["hint"], tc.hint)
			}
		})
	}
}

// TestOutboundTCPFailure: a tcp listener's client whose tlcp:// upstream
// fails its handshake has its connection closed at once, and the
// failure is counted and logged.
func TestOutboundTCPFailure(t *testing.T) {
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsServer.Close)
	gw, logs := clientGateway(t, "tcp", fmt.Sprintf("%q", "tlcp://"+tlsServer.Listener.Addr().String()), "insecure_skip_verify: true", "retries: 0")
	c, err := net.Dial("tcp", gw.Addr("app").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read %d bytes, %v; want EOF", n, err)
	}
	reason := "alert_received_protocol_version_not_supported"
	if v := counterSum(t, gw, "gmgate_upstream_failures_total", map[string]string{"stage": "handshake", "reason": reason}); v != 1 {
		t.Errorf("%v failures counted", v)
	}
	if logLine(logs, "upstream failed", map[string]string{"reason": reason}) == nil {
		t.Errorf("no log line:\n%s", logs)
	}
}

// hangUpAfterHandshake is a TLCP server that completes the handshake,
// reads the request and closes the connection without an answer.
func hangUpAfterHandshake(t *testing.T, p *testPKI) string {
	t.Helper()
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	return testnet.Serve(t, func(c net.Conn) {
		tc := tlcp.Server(c, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}})
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = tc.Read(make([]byte, 4096))
	})
}

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	t.Cleanup(func() { close(done); ln.Close() })
	return ln.Addr().String()
}

// TestOutboundHealthChecks: the health checks of a tlcp:// upstream run
// over TLCP with the client identity, as an HTTP GET of health.path or,
// without a path, as a connect and handshake; a target whose checks fail
// goes out of service with the failed step in the log.
func TestOutboundHealthChecks(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	var checks atomic.Int64
	var subject atomic.Value
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && r.UserAgent() == "gmgate-health-check" {
			subject.Store(r.Header.Get("X-Client-Subject"))
			checks.Add(1)
		}
	}))
	t.Cleanup(app.Close)
	svc := tlcpService(t, p, app.URL)
	target := fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String())

	t.Run("path", func(t *testing.T) {
		gw, _ := clientGateway(t, "http", target, identitySection(p, id, "ECC_SM4_GCM_SM3"), "health: {path: /healthz, interval: 50ms}")
		testwait.For(t, "health checks over TLCP", func() bool { return checks.Load() >= 3 })
		if got := subject.Load(); got != "CN=legacy-app" {
			t.Errorf("the check came with client subject %q", got)
		}
		if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner"}); v < 1 {
			t.Errorf("%v handshakes", v)
		}
	})
	t.Run("handshake", func(t *testing.T) {
		svc2 := tlcpService(t, p, app.URL)
		gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc2.Addr("edge").String()), identitySection(p, id, "ECC_SM4_GCM_SM3"), "health: {interval: 50ms, fails: 1}")
		testwait.For(t, "handshake checks", func() bool {
			return counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner", "resumed": "true"}) >= 2
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc2.Shutdown(ctx)
		testwait.For(t, "the target to go down", func() bool {
			v, _ := metricValue(scrape(t, gw), "gmgate_upstream_targets_healthy", map[string]string{"upstream": "partner"})
			return v == 0
		})
		// A check that connected while the target was shutting down
		// ends in its handshake; the next ones find the port closed.
		line := logLine(logs, "upstream target down", nil)
		if cause := fmt.Sprint(line["cause"]); line == nil || !strings.Contains(cause, "TCP connect failed") && !strings.Contains(cause, "TLCP handshake failed") {
			t.Errorf("target down line: %v\n%s", line, logs)
		}
	})
}

// TestCheckUpstreamTLCP: config check loads a tlcp:// upstream's CA and
// client identity as serve does and reports each problem at its line:
// a missing certificate file, a key that belongs to another certificate,
// an unreadable CA file.
func TestCheckUpstreamTLCP(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	other, _ := clientIdentity(t, p)
	dir := tempDir(t)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: partner}]
upstreams:
  partner:
    targets: ["tlcp://127.0.0.1:1"]
    tlcp:
      ca: %s
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
`, filepath.Join(dir, "missing-ca.crt"), filepath.Join(dir, "missing.sign.crt"), id.SignKey, id.EncCert, other.EncKey)
	_, err := Check(parseConfig(t, doc), CheckOptions{})
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("Check: %v", err)
	}
	want := []struct {
		line int
		path string
		text string
	}{
		{11, "upstreams.partner.tlcp.ca", "missing-ca.crt"},
		{12, "upstreams.partner.tlcp.sign_cert", "missing.sign.crt"},
		{15, "upstreams.partner.tlcp.enc_key", "does not belong to enc_cert"},
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		pr := ce.Problems[i]
		if pr.Line != w.line || pr.Path != w.path || !strings.Contains(pr.Msg, w.text) {
			t.Errorf("problem %d = %s, want line %d %s with %q", i, pr, w.line, w.path, w.text)
		}
	}
}

// TestOutboundWarnings: insecure_skip_verify and a tcp listener on a
// public address serve, with a warning from config check and in the log
// at start and at every reload.
func TestOutboundWarnings(t *testing.T) {
	doc := `admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: app
    listen: "0.0.0.0:0"
    protocol: tcp
    routes: [{upstream: partner}]
upstreams:
  partner:
    targets: ["tlcp://127.0.0.1:1"]
    health: {disabled: true}
    tlcp: {insecure_skip_verify: true}
`
	res, err := Check(parseConfig(t, doc), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range res.Warnings {
		got = append(got, w.String())
	}
	text := strings.Join(got, "\n")
	for _, want := range []string{
		"gmgate.yaml:5: listeners[0].listen: the tcp listener takes plain-text connections on 0.0.0.0:0, which is not a loopback address",
		"gmgate.yaml:12: upstreams.partner.tlcp.insecure_skip_verify: the targets' certificates are not verified",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("warnings lack %q:\n%s", want, text)
		}
	}
	s, logs := startLogged(t, parseConfig(t, doc), nil)
	if err := s.Reload(parseConfig(t, doc)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "insecure_skip_verify: the targets' certificates are not verified"); n != 2 {
		t.Errorf("the insecure warning was logged %d times over a start and a reload, want 2:\n%s", n, logs)
	}
}

package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// echoUpstream answers with what it received, as JSON.
func echoUpstream(t testing.TB, name string) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", name)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.RequestURI(), "host": r.Host,
			"headers": r.Header, "body": string(body), "upstream": name,
		})
	}))
	t.Cleanup(up.Close)
	return up
}

type echoed struct {
	Method, Path, Host, Body, Upstream string
	Headers                            http.Header
}

func TestHTTPOverTLCP(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	var access testlog.Buffer
	s := startServer(t, testConfig(p, up.URL), slog.New(slog.NewJSONHandler(&access, nil)))
	client := tlcpClient(t, p, nil)

	req, _ := http.NewRequest("POST", gatewayURL(s, "/orders?id=7"), strings.NewReader("hello upstream"))
	req.Host = "api.example.cn"
	req.Header.Set("X-TLCP-Suite", "forged")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "must not pass")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Upstream") != "a" {
		t.Fatalf("status %d, X-Upstream %q: %s", resp.StatusCode, resp.Header.Get("X-Upstream"), body)
	}
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatal(err)
	}
	if e.Method != "POST" || e.Path != "/orders?id=7" || e.Host != "api.example.cn" || e.Body != "hello upstream" {
		t.Errorf("upstream saw %+v", e)
	}
	want := map[string]string{
		"X-Forwarded-For":   "127.0.0.1",
		"X-Forwarded-Proto": "https",
		"X-Forwarded-Host":  "api.example.cn",
		"Forwarded":         "for=127.0.0.1;host=api.example.cn;proto=https",
		"X-Tlcp-Protocol":   "tlcp",
		"X-Tlcp-Suite":      tlcp.CipherSuiteName(tlcp.DefaultCipherSuites[0]),
		"X-Tlcp-Resumed":    "false",
		"X-Hop":             "",
		"X-Client-Subject":  "",
	}
	for k, v := range want {
		if got := strings.Join(e.Headers.Values(k), ","); got != v {
			t.Errorf("upstream header %s = %q, want %q", k, got, v)
		}
	}

	// One access log line with the fields operators grep for.
	testwait.For(t, "access log line", func() bool { return strings.Contains(access.String(), `"path":"/orders"`) })
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(access.String(), "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "client", "sni", "protocol", "suite", "resumed", "handshake_ms", "method", "host", "path", "status", "bytes", "upstream", "duration_ms"} {
		if _, ok := line[k]; !ok {
			t.Errorf("access log lacks %q: %v", k, line)
		}
	}
	if line["status"] != float64(201) || line["upstream"] != "app" || line["protocol"] != "tlcp" {
		t.Errorf("access log: %v", line)
	}
}

// The response body reaches the client while the upstream is still
// writing it: the test reads the first chunk before it lets the upstream
// send the second.
func TestStreamingBody(t *testing.T) {
	p := getPKI(t)
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "second\n")
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	close(next)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestAutoPortServesTLCPAndTLS(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	s := startServer(t, testConfig(p, up.URL), nil)

	tls12 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", MaxVersion: tls.VersionTLS12}}
	defer tls12.CloseIdleConnections()
	clients := map[string]*http.Client{"tlcp": tlcpClient(t, p, nil), "tls1.3": tlsClient(t, p), "tls1.2": {Transport: tls12}}
	for name, client := range clients {
		resp, err := client.Get(gatewayURL(s, "/who"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var e echoed
		if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
			t.Fatal(err)
		}
		if got := e.Headers.Get("X-Tlcp-Protocol"); got != name {
			t.Errorf("%s client: upstream saw protocol %q", name, got)
		}
		if name == "tls1.3" && (resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13) {
			t.Errorf("TLS client did not negotiate TLS 1.3")
		}
		if name == "tls1.2" && (resp.TLS == nil || resp.TLS.Version != tls.VersionTLS12) {
			t.Errorf("TLS client did not negotiate TLS 1.2")
		}
	}
}

func TestTCPModeEcho(t *testing.T) {
	p := getPKI(t)
	// Health checks connect too; every connection is echoed.
	echo := testnet.Serve(t, func(c net.Conn) {
		_, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
		_ = c.(*net.TCPConn).CloseWrite()
	})
	cfg := testConfig(p, "tcp://"+echo)
	cfg.Listeners[0].Protocol = config.ProtocolTLCP
	cfg.Listeners[0].TLS = nil
	s := startServer(t, cfg, nil)

	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := bytes.Repeat([]byte("gmgate tcp mode "), 4096)
	go func() {
		_, _ = conn.Write(msg)
		_ = conn.CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo returned %d bytes, want %d", len(got), len(msg))
	}
}

func TestUpstreamKilledIsEjected(t *testing.T) {
	p := getPKI(t)
	a := echoUpstream(t, "a")
	b := echoUpstream(t, "b")
	cfg := testConfig(p, a.URL, b.URL)
	up := cfg.Upstreams["app"]
	up.Health = config.Health{Path: "/", Interval: config.Duration(20 * time.Millisecond), Timeout: config.Duration(time.Second), Fails: 1, Passes: 1}
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)

	seen := map[string]int{}
	get := func() string {
		resp, err := client.Get(gatewayURL(s, "/"))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Upstream")
	}
	for range 4 {
		seen[get()]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Fatalf("round robin used %v", seen)
	}

	b.Close()
	// Every request still succeeds: a GET that could not be sent to the
	// dead target is retried on the live one.
	for range 10 {
		if u := get(); u != "a" {
			t.Fatalf("request served by %q after b died", u)
		}
	}
	testwait.For(t, "health checks to take b out", func() bool {
		v, _ := metricValue(scrape(t, s), "gmgate_upstream_targets_healthy", map[string]string{"upstream": "app"})
		return v == 1
	})
	for range 4 {
		if u := get(); u != "a" {
			t.Fatalf("request served by %q after b was ejected", u)
		}
	}
}

func TestNoHealthyUpstreamIs503(t *testing.T) {
	p := getPKI(t)
	addr := closedAddr(t)
	cfg := testConfig(p, "http://"+addr)
	cfg.Upstreams["app"].Health.Disabled = true
	// Without panic mode, which would keep trying the ejected target
	// (TestLastTargetStaysInService).
	cfg.Upstreams["app"].Passive.PanicThreshold = intp(0)
	s, logs := startLogged(t, cfg, nil)
	client := tlcpClient(t, p, nil)

	resp, err := client.Get(gatewayURL(s, "/x"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadGateway || body != "502 Bad Gateway: the upstream server refused the connection\n" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), `"msg":"upstream failed","upstream":"app","target":"`+addr+`"`) {
		t.Errorf("no log line naming the upstream: %s", logs.String())
	}
	// After max_fails refusals the target is ejected: 503.
	for range 3 {
		resp, err = client.Get(gatewayURL(s, "/x"))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after ejection: %d, want 503", resp.StatusCode)
	}
}

func TestUpstreamTimeoutIs504(t *testing.T) {
	p := getPKI(t)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	defer close(release)
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.UpstreamResponse = config.Duration(50 * time.Millisecond)
	cfg.Upstreams["app"].Health.Disabled = true
	s := startServer(t, cfg, nil)
	resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/slow"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusGatewayTimeout || !strings.HasPrefix(body, "504 Gateway Timeout") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
}

// switchToWebSocket answers an upstream's request with 101 Switching
// Protocols to WebSocket and returns the connection (nil when it could
// not be taken over).
func switchToWebSocket(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil
	}
	fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	return c, brw
}

func TestWebSocketUpgrade(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "no upgrade", 400)
			return
		}
		c, brw := switchToWebSocket(w)
		if c == nil {
			return
		}
		defer c.Close()
		line, _ := brw.ReadString('\n')
		fmt.Fprint(brw, "echo: "+line)
		brw.Flush()
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	fmt.Fprint(conn, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: ping\n" {
		t.Fatalf("got %q, %v", line, err)
	}
}

func TestInflightRequestSurvivesCertificateReload(t *testing.T) {
	p := getPKI(t)
	dir := tempDir(t)
	files := p.copyTo(t, dir)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprint(w, "done")
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	l := cfg.Listeners[0].TLCP
	l.SignCert, l.SignKey, l.EncCert, l.EncKey = files.SignCert, files.SignKey, files.EncCert, files.EncKey
	s := startServer(t, cfg, nil)

	serialOf := func() string {
		c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", SessionsDisabled: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serialOf()

	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/slow"))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{string(b), err}
	}()
	<-entered

	// Replace the certificate files with a new pair and reload.
	newDir := tempDir(t)
	other := &testPKI{ca: p.ca}
	if err := other.issue(newDir); err != nil {
		t.Fatal(err)
	}
	other.copyTo(t, dir)
	if err := s.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}
	after := serialOf()
	if after == before {
		t.Fatal("new connections still get the old certificate")
	}
	close(release)
	r := <-done
	if r.err != nil || r.body != "done" {
		t.Fatalf("in-flight request: %q, %v", r.body, r.err)
	}
}

func TestHTTPSUpstreamWithClientCertificate(t *testing.T) {
	p := getPKI(t)
	dir := tempDir(t)
	clientCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := clientCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"gmgate.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := leaf.Write(dir, "client", nil)
	if err != nil {
		t.Fatal(err)
	}
	clientRoots := x509.NewCertPool()
	root, _ := x509.ParseCertificate(leaf.Root.Raw)
	clientRoots.AddCert(root)

	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "client=%s sni=%s", r.TLS.PeerCertificates[0].Subject.CommonName, r.TLS.ServerName)
	}))
	up.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientRoots}
	up.StartTLS()
	defer up.Close()
	caFile := dir + "/upstream-ca.crt"
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(p, up.URL)
	cfg.Upstreams["app"].TLS = &config.UpstreamTLS{CA: caFile, Cert: certFile, Key: keyFile, ServerName: "example.com"}
	s := startServer(t, cfg, nil)
	resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "client=gmgate.internal sni=example.com" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}

	// Without the right CA the upstream's certificate is refused: 502.
	cfg2 := testConfig(p, up.URL)
	cfg2.Upstreams["app"].TLS = &config.UpstreamTLS{Cert: certFile, Key: keyFile}
	cfg2.Upstreams["app"].Health.Disabled = true
	s2 := startServer(t, cfg2, nil)
	resp, err = tlcpClient(t, p, nil).Get(gatewayURL(s2, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("unverified upstream: %d", resp.StatusCode)
	}
}

// Only idempotent requests are retried on another target; a POST that
// met a dead target answers 502 rather than risk being applied twice.
func TestRetriesOnlyIdempotent(t *testing.T) {
	p := getPKI(t)
	live := echoUpstream(t, "live")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	cfg := testConfig(p, live.URL, deadURL)
	up := cfg.Upstreams["app"]
	up.Health.Disabled = true
	zero := 0
	up.Passive.MaxFails = &zero
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)
	codes := map[string][]int{}
	for _, method := range []string{"GET", "GET", "POST", "POST"} {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("x")
		}
		req, _ := http.NewRequest(method, gatewayURL(s, "/"), body)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		codes[method] = append(codes[method], resp.StatusCode)
	}
	if fmt.Sprint(codes["GET"]) != "[201 201]" {
		t.Errorf("GETs: %v, want both served (retried on the live target)", codes["GET"])
	}
	if got := fmt.Sprint(codes["POST"]); got != "[201 502]" && got != "[502 201]" {
		t.Errorf("POSTs: %v, want one served and one 502", codes["POST"])
	}
}

func TestClientCertificateHeaders(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	l := &cfg.Listeners[0]
	l.TLCP.ClientAuth = "require_and_verify"
	l.TLCP.ClientCA = p.dual.CACert
	l.SessionHeaders.ClientSerial = "X-Client-Serial"
	l.SessionHeaders.ClientFingerprint = "X-Client-Fingerprint"
	s := startServer(t, cfg, nil)

	pair, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "teller-7", Organization: []string{"Branch 12"}}})
	if err != nil {
		t.Fatal(err)
	}
	client := tlcpClient(t, p, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{*pair.Certificate()}})
	req, _ := http.NewRequest("GET", gatewayURL(s, "/"), nil)
	req.Header.Set("X-Client-Subject", "CN=forged")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pair.SignCert.Raw)
	want := map[string]string{
		"X-Client-Subject":     "CN=teller-7,O=Branch 12",
		"X-Client-Serial":      strings.ToUpper(pair.SignCert.SerialNumber.Text(16)),
		"X-Client-Fingerprint": hex.EncodeToString(sum[:]),
	}
	for k, v := range want {
		if got := strings.Join(e.Headers.Values(k), ","); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}

	// Without a client certificate the handshake is refused.
	if _, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/")); err == nil {
		t.Error("a client without a certificate was served")
	}
}

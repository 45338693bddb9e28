package proxy

// Tests of the limits that keep one client, or a few, from hurting the
// others: handshake slots, request bodies, upstream ejection, header
// spoofing and request framing. The hostile-client suite (hostile_test.go)
// runs the same attacks at scale.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
)

// dialTLCP opens a TLCP connection to the gateway's edge listener.
func dialTLCP(t testing.TB, p *testPKI, s *Server) *tlcp.Conn {
	t.Helper()
	c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// jsonLines returns the JSON log lines whose msg is msg.
func jsonLines(t testing.TB, logs string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func intp(n int) *int { return &n }

// checkRateLimited checks that n events, which took elapsed, made at most
// logBurst lines msg a second (those for which match holds), and that the
// summary lines count the others.
func checkRateLimited(t *testing.T, logs *testlog.Buffer, msg, summary string, match func(map[string]any) bool, n int, elapsed time.Duration) {
	t.Helper()
	count := func() (lines, suppressed int) {
		for _, l := range jsonLines(t, logs.String(), msg) {
			if match == nil || match(l) {
				lines++
			}
		}
		for _, l := range jsonLines(t, logs.String(), summary) {
			suppressed += int(l["suppressed"].(float64))
		}
		return lines, suppressed
	}
	testwait.For(t, "every event to be logged or counted", func() bool {
		lines, suppressed := count()
		return lines+suppressed >= n
	})
	lines, suppressed := count()
	if lines+suppressed != n || suppressed == 0 || lines > observe.LogBurst*(int(elapsed/time.Second)+2) {
		t.Errorf("%d lines and %d suppressed for %d events in %v", lines, suppressed, n, elapsed)
	}
}

// A client that sends part of its ClientHello and stops holds no handshake
// slot: with one slot, a well-behaved client still gets through.
func TestSlowClientHelloHoldsNoSlot(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Limits.MaxHandshakes = 1
	cfg.Limits.HandshakeWait = config.Duration(time.Millisecond)
	s := startServer(t, cfg, nil)
	hello := clientHello(t, p)
	for _, n := range []int{1, edge.RecordHeaderLen, len(hello) - 1} {
		c, err := net.Dial("tcp", s.Addr("edge").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(hello[:n]); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "the slow clients to be accepted", func() bool { return s.activeConns("edge") == 3 })
	mustServeTLCP(t, p, s)
	if n := s.current().handshakes["edge"].InUse(); n != 0 {
		t.Errorf("%d slots held by clients that have not sent a ClientHello", n)
	}
}

// A client that never finishes its ClientHello is closed after
// timeouts.client_hello, well before the handshake timeout.
func TestClientHelloTimeout(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.ClientHello = config.Duration(100 * time.Millisecond)
	cfg.Timeouts.Handshake = config.Duration(time.Hour)
	s := startServer(t, cfg, nil)
	c, err := net.Dial("tcp", s.Addr("edge").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(clientHello(t, p)[:10]); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read %d bytes, %v; want the gateway to close the connection", n, err)
	}
	v, _ := metricValue(scrape(t, s), "gmgate_handshakes_total", map[string]string{"result": "timeout"})
	if v != 1 {
		t.Errorf("handshakes timed out = %v, want 1", v)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Each listener has its own handshake slots: clients that hold all of one
// listener's slots do not keep another listener's clients out.
func TestHandshakeSlotsPerListener(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	second := cfg.Listeners[0]
	second.Name = "second"
	cfg.Listeners = append(cfg.Listeners, second)
	cfg.Limits.MaxHandshakes = 1
	cfg.Limits.HandshakeWait = config.Duration(time.Millisecond)
	s := startServer(t, cfg, nil)

	// A complete ClientHello, then nothing: the edge listener's only
	// slot is taken until the handshake times out.
	c, err := net.Dial("tcp", s.Addr("second").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(clientHello(t, p)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the client to hold the second listener's slot", func() bool { return s.current().handshakes["second"].InUse() == 1 })
	mustServeTLCP(t, p, s)
}

// Handshake failures are logged at info with what an operator needs, a
// few lines a second per listener, and a summary line counts the rest.
func TestHandshakeFailuresLoggedAtInfo(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	s, logs := startLogged(t, testConfig(p, up.URL), nil)
	addr := s.Addr("edge").String()

	// A client that does not trust the gateway's certificate ends the
	// handshake with an alert.
	_, err := tlcp.Dial("tcp", addr, &tlcp.Config{ServerName: "localhost"})
	if err == nil {
		t.Fatal("a client without the CA completed the handshake")
	}
	testwait.For(t, "the handshake failure to be logged", func() bool { return len(jsonLines(t, logs.String(), "handshake failed")) == 1 })
	line := jsonLines(t, logs.String(), "handshake failed")[0]
	if line["level"] != "INFO" || line["listener"] != "edge" || line["protocol"] != "tlcp" || !strings.HasPrefix(line["client"].(string), "127.0.0.1:") ||
		line["alert_received"] == nil || line["cause"] == "" || !strings.HasPrefix(line["result"].(string), "alert_received_") {
		t.Errorf("log line: %v", line)
	}

	// A flood of failures: a few lines, and a count of the rest.
	const flood = 60
	start := time.Now()
	for range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte{23, 3, 3, 0, 1, 0}) // application data first
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}
	checkRateLimited(t, logs, "handshake failed", "handshake failures not logged",
		func(l map[string]any) bool { return l["result"] == "not_tlcp_or_tls" }, flood, time.Since(start))
}

// POSTs with a malformed chunked body, or whose client goes away in the
// middle of the body, are the client's failures: 400 (or nothing, logged
// as 499), and the upstream target is not ejected for them.
func TestClientBodyErrorsDoNotEjectTargets(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	var access testlog.Buffer
	cfg := testConfig(p, up.URL)
	cfg.Upstreams["app"].Health.Disabled = true
	// Without panic mode, an ejected target would answer 503.
	cfg.Upstreams["app"].Passive.PanicThreshold = intp(0)
	s, logs := startLogged(t, cfg, slog.New(slog.NewJSONHandler(&access, nil)))

	for range 5 {
		c := dialTLCP(t, p, s)
		fmt.Fprint(c, "POST /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Fatalf("malformed body: %d %q, close %v; want 400 and the connection closed", resp.StatusCode, body, resp.Close)
		}
	}
	for range 5 {
		c := dialTLCP(t, p, s)
		fmt.Fprint(c, "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nonly part of it")
		c.CloseWrite()
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Fatalf("a client that went away was sent %q", b)
		}
	}
	testwait.For(t, "the aborted requests in the access log", func() bool {
		n := 0
		for _, l := range jsonLines(t, access.String(), "request") {
			if l["status"] == float64(forward.StatusClientClosed) {
				n++
			}
		}
		return n == 5
	})
	resp, _ := get(t, tlcpClient(t, p, nil), gatewayURL(s, "/after"))
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("after the client errors: %d, want the upstream's 201", resp.StatusCode)
	}
	if strings.Contains(logs.String(), "ejected") || strings.Contains(logs.String(), `"msg":"upstream failed"`) {
		t.Errorf("client errors counted against the upstream:\n%s", logs.String())
	}
	if v, _ := metricValue(scrape(t, s), "gmgate_upstream_requests_total", map[string]string{"code": "error"}); v != 0 {
		t.Errorf("%v upstream errors counted", v)
	}
}

// timeouts.request_body cuts off a body that stops arriving (408), but
// not a slow upload that keeps moving: it bounds the idle time, not the
// whole upload.
func TestRequestBodyTimeout(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	// The slow upload below keeps 10 bytes a second: above the rate.
	rate := 5
	cfg.Timeouts.RequestBodyMinRate = &rate
	s := startServer(t, cfg, nil)

	c := dialTLCP(t, p, s)
	fmt.Fprint(c, "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nthe first bytes")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("stalled body: %d %q, close %v; want 408 and the connection closed", resp.StatusCode, body, resp.Close)
	}

	// 20 bytes, one every 100 ms: two seconds in all, never idle for 300 ms.
	pr, pw := io.Pipe()
	go func() {
		for i := range 20 {
			time.Sleep(100 * time.Millisecond)
			if _, err := pw.Write([]byte{'a' + byte(i)}); err != nil {
				return
			}
		}
		pw.Close()
	}()
	resp, err = tlcpClient(t, p, nil).Post(gatewayURL(s, "/stream"), "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil || resp.StatusCode != http.StatusCreated || e.Body != "abcdefghijklmnopqrst" {
		t.Errorf("slow upload: %d %+v %v", resp.StatusCode, e, err)
	}
}

// When the only target fails a few requests in a row it is not ejected
// into a 30 s outage: panic mode keeps trying it, so service returns as
// soon as the target does.
func TestLastTargetStaysInService(t *testing.T) {
	p := getPKI(t)
	addr := closedAddr(t)
	cfg := testConfig(p, "http://"+addr)
	cfg.Upstreams["app"].Health.Disabled = true
	cfg.Upstreams["app"].Passive.EjectFor = config.Duration(time.Hour)
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)
	for range 5 {
		resp, _ := get(t, client, gatewayURL(s, "/"))
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("target down: %d, want 502 (it is still tried)", resp.StatusCode)
		}
	}
	// The target comes back on the same address.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the target's port was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })}
	go srv.Serve(ln)
	defer srv.Close()
	resp, _ := get(t, client, gatewayURL(s, "/"))
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("target back: %d, want its 418", resp.StatusCode)
	}
}

// A passed active health check ends a passive ejection.
func TestHealthCheckEndsEjection(t *testing.T) {
	p := getPKI(t)
	healthy := echoUpstream(t, "healthy")
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			// A connection cut before any response: a passive failure.
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer flaky.Close()
	cfg := testConfig(p, healthy.URL, flaky.URL)
	up := cfg.Upstreams["app"]
	up.Retries = intp(0)
	up.Passive.EjectFor = config.Duration(time.Hour)
	up.Health = config.Health{Path: "/healthz", Interval: config.Duration(50 * time.Millisecond), Timeout: config.Duration(time.Second), Fails: 1, Passes: 1}
	s := startServer(t, cfg, nil)
	var flakyTarget *upstream.Target
	for _, tg := range s.current().pools["app"].Targets {
		if "http://"+tg.Addr == flaky.URL {
			flakyTarget = tg
		}
	}

	client := tlcpClient(t, p, nil)
	for i := 0; flakyTarget.Available(time.Now()); i++ {
		if i == 100 {
			t.Fatal("the failing target was never ejected")
		}
		get(t, client, gatewayURL(s, "/work"))
	}
	// Ejected for an hour, but its health check passes.
	testwait.For(t, "a passed health check to end the ejection", func() bool { return flakyTarget.Available(time.Now()) })
}

// The per-request failure lines are a few a second, and a summary counts
// the rest.
func TestUpstreamFailureLinesRateLimited(t *testing.T) {
	p := getPKI(t)
	cfg := testConfig(p, "http://"+closedAddr(t))
	cfg.Upstreams["app"].Health.Disabled = true
	s, logs := startLogged(t, cfg, nil)
	client := tlcpClient(t, p, nil)
	const failures = 60
	start := time.Now()
	for range failures {
		get(t, client, gatewayURL(s, "/"))
	}
	checkRateLimited(t, logs, "upstream failed", "upstream failures not logged", nil, failures, time.Since(start))
}

// Headers whose names a CGI-style backend would read as a header gmgate
// sets are removed, whatever their case or '_' for '-'; X-Real-IP is set.
func TestSpoofedHeaderVariantsRemoved(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	s := startServer(t, testConfig(p, up.URL), nil)
	req, _ := http.NewRequest("GET", gatewayURL(s, "/"), nil)
	forged := map[string]string{
		"X_Forwarded_For":   "6.6.6.6",
		"x_forwarded_proto": "http",
		"X-Real-IP":         "6.6.6.6",
		"X_Real_Ip":         "6.6.6.6",
		"X_TLCP_Protocol":   "forged",
		"X-Client_Subject":  "CN=admin",
		"X-Innocent_Header": "kept",
	}
	for k, v := range forged {
		req.Header[k] = []string{v}
	}
	resp, err := tlcpClient(t, p, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
		t.Fatal(err)
	}
	for k, vs := range e.Headers {
		for _, v := range vs {
			if v == "6.6.6.6" || v == "forged" || v == "CN=admin" || v == "http" {
				t.Errorf("forged header reached the upstream: %s: %s", k, v)
			}
		}
	}
	if got := e.Headers.Get("X-Real-Ip"); got != "127.0.0.1" {
		t.Errorf("X-Real-IP = %q, want the client's address", got)
	}
	if got := e.Headers.Get("X-Innocent_header"); got != "kept" {
		t.Errorf("an unrelated header was removed: %v", e.Headers)
	}
}

// A request with both Content-Length and Transfer-Encoding is answered,
// then its connection is closed (RFC 9112 §6.1); a plain chunked request
// keeps its connection.
func TestContentLengthWithTransferEncodingClosesConnection(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	s := startServer(t, testConfig(p, up.URL), nil)
	for _, c := range []struct {
		headers   string
		wantClose bool
	}{
		{"Transfer-Encoding: chunked\r\n", false},
		{"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", true},
		{"transfer-encoding: chunked\r\ncontent-length: 40\r\n", true},
	} {
		conn := dialTLCP(t, p, s)
		br := bufio.NewReader(conn)
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: localhost\r\n%s\r\n5\r\nhello\r\n0\r\n\r\n", c.headers)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var e echoed
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Body != "hello" {
			t.Fatalf("%q: body %q, %v", c.headers, e.Body, err)
		}
		resp.Body.Close()
		if resp.Close != c.wantClose {
			t.Errorf("%q: Connection: close is %v, want %v", c.headers, resp.Close, c.wantClose)
		}
		// Closed, or still serving.
		fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		_, err = http.ReadResponse(br, nil)
		if closed := err != nil; closed != c.wantClose {
			t.Errorf("%q: second request: %v, want the connection closed: %v", c.headers, err, c.wantClose)
		}
	}
}

// An upstream's response header larger than limits.max_response_header_bytes
// is refused with 502, not passed on.
func TestUpstreamResponseHeaderLimit(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge" {
			w.Header().Set("X-Huge", strings.Repeat("x", 200<<10))
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Upstreams["app"].Health.Disabled = true
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)
	for path, want := range map[string]int{"/huge": http.StatusBadGateway, "/small": http.StatusOK} {
		resp, _ := get(t, client, gatewayURL(s, path))
		if resp.StatusCode != want || len(resp.Header.Get("X-Huge")) != 0 {
			t.Errorf("%s: %d with a %d-byte header, want %d", path, resp.StatusCode, len(resp.Header.Get("X-Huge")), want)
		}
	}
}

// What net/http writes to the standard logger while the gateway runs (here
// the transport's complaint about an upstream that talks out of turn) is
// in the JSON log.
func TestNetHTTPLinesInJSONLog(t *testing.T) {
	p := getPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				// A response, then another nobody asked for.
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				time.Sleep(50 * time.Millisecond)
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
				time.Sleep(time.Second)
			}()
		}
	}()
	cfg := testConfig(p, "http://"+ln.Addr().String())
	cfg.Upstreams["app"].Health.Disabled = true
	s, logs := startLogged(t, cfg, nil)
	get(t, tlcpClient(t, p, nil), gatewayURL(s, "/"))
	testwait.For(t, "the transport's line in the JSON log", func() bool {
		for _, l := range jsonLines(t, logs.String(), "net/http") {
			if strings.Contains(fmt.Sprint(l["error"]), "Unsolicited response") && l["level"] == "WARN" {
				return true
			}
		}
		return false
	})
}

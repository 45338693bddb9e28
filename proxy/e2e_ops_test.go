package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	proxyproto "github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestShutdownDrainsInFlight(t *testing.T) {
	p := getPKI(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprint(w, "finished")
	}))
	defer up.Close()
	s, err := New(testConfig(p, up.URL), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	addr := s.Addr("edge").String()
	admin := "http://" + s.AdminAddr().String()

	done := make(chan string, 1)
	go func() {
		resp, err := tlcpClient(t, p, nil).Get("https://" + addr + "/slow")
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()

	// Draining: /readyz says so, and no new connection is accepted.
	testwait.For(t, "readyz to report draining", func() bool {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	testwait.For(t, "the listener to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	if got := <-done; got != "200 finished" {
		t.Fatalf("in-flight request: %s", got)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownTimeoutClosesLeftovers(t *testing.T) {
	p := getPKI(t)
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	s, err := New(testConfig(p, up.URL), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	errc := make(chan error, 1)
	go func() {
		resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/stuck"))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("the stuck request completed; it should have been cut")
	}
}

func TestMetricsShowHandshakesAndLatency(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].TLCP.Suites = []string{"ECC_SM4_GCM_SM3"}
	s := startServer(t, cfg, nil)

	before := scrape(t, s)
	hsBefore, _ := metricValue(before, "gmgate_handshake_duration_seconds", map[string]string{"protocol": "tlcp", "result": "ok"})

	for range 3 {
		mustServeTLCP(t, p, s)
	}
	resp, err := tlsClient(t, p).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	// A TLCP client offering a suite the listener does not enable.
	cfgOnlyCBC := &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_CBC_SM3}}
	if c, err := tlcp.Dial("tcp", s.Addr("edge").String(), cfgOnlyCBC); err == nil {
		c.Close()
		t.Fatal("handshake with no common suite succeeded")
	}
	// Plain HTTP on the TLCP/TLS port: a 400 that says why.
	if c, err := net.Dial("tcp", s.Addr("edge").String()); err == nil {
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		answer, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(answer), "HTTP/1.1 400 Bad Request\r\n") || !strings.HasSuffix(string(answer), "a plain HTTP request was sent to a TLCP/TLS (HTTPS) port.\n") {
			t.Errorf("plain HTTP got %q", answer)
		}
	}
	// Something that is neither TLCP, TLS nor HTTP.
	if c, err := net.Dial("tcp", s.Addr("edge").String()); err == nil {
		c.Write([]byte{0, 1, 2, 3, 4, 5})
		_, _ = io.ReadAll(c)
		c.Close()
	}

	var mf = scrape(t, s)
	testwait.For(t, "the failed handshakes to be counted", func() bool {
		mf = scrape(t, s)
		v, _ := metricValue(mf, "gmgate_handshakes_total", map[string]string{"protocol": "unknown", "result": "not_tlcp_or_tls"})
		v2, _ := metricValue(mf, "gmgate_handshakes_total", map[string]string{"protocol": "unknown", "result": "plain_http"})
		return v == 1 && v2 == 1
	})
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "suite": "ECC_SM4_GCM_SM3", "result": "ok"}, 3},
		{"gmgate_handshakes_total", map[string]string{"protocol": "tls1.3", "result": "ok"}, 1},
		{"gmgate_handshake_duration_seconds", map[string]string{"protocol": "tlcp", "result": "ok"}, hsBefore + 3},
		{"gmgate_upstream_requests_total", map[string]string{"upstream": "app", "code": "201"}, 4},
		{"gmgate_request_duration_seconds", map[string]string{"listener": "edge"}, 4},
		{"gmgate_upstream_response_duration_seconds", map[string]string{"upstream": "app"}, 4},
	}
	// Key operations reach the accel metrics: every full ECC handshake
	// signs with the signing key and decrypts with the encryption key.
	for _, op := range []string{"sign", "decrypt"} {
		if v, ok := metricValue(mf, "gmgate_accel_ops_total", map[string]string{"op": op, "result": "ok"}); !ok || v < 3 {
			t.Errorf("gmgate_accel_ops_total{op=%s,result=ok} = %v, want at least 3", op, v)
		}
	}
	if v, _ := metricValue(mf, "gmgate_accel_op_duration_seconds", map[string]string{"op": "sign"}); v < 3 {
		t.Errorf("accel sign duration histogram count = %v", v)
	}
	for _, c := range checks {
		got, ok := metricValue(mf, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The failed TLCP handshake is labelled with its alert.
	found := false
	for _, m := range mf["gmgate_handshakes_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "result" && strings.HasPrefix(l.GetValue(), "alert_") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no handshake labelled with an alert: %v", mf["gmgate_handshakes_total"])
	}
	for _, name := range []string{"gmgate_connections_active", "gmgate_certificate_expiry_timestamp_seconds", "gmgate_upstream_targets_healthy"} {
		if _, ok := mf[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

func TestHandshakeLimitRefusesAfterWait(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Limits.MaxHandshakes = 1
	cfg.Limits.HandshakeWait = config.Duration(time.Millisecond)
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()

	// A client that sends its whole ClientHello and stops holds the only
	// slot. (One that sends less holds none: the slot is taken once the
	// hello is in.)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := idle.Write(clientHello(t, p)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the idle client to hold the handshake slot", func() bool {
		return s.current().handshakes["edge"].InUse() == 1
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(clientHello(t, p)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("refused connection read %d bytes", n)
	}
	mf := scrape(t, s)
	if v, _ := metricValue(mf, "gmgate_connections_refused_total", map[string]string{"reason": "max_handshakes"}); v != 1 {
		t.Errorf("refused max_handshakes = %v, want 1", v)
	}
	// Once the slot is free, handshakes go through again.
	idle.Close()
	testwait.For(t, "the slot to be released", func() bool { return s.current().handshakes["edge"].InUse() == 0 })
	mustServeTLCP(t, p, s)
}

// dialAndSpeak connects to addr and sends the first byte of a handshake
// record, so that the listener (which defers accept until the client
// speaks) hands the connection over.
func dialAndSpeak(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{0x16}); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// TestSilentConnectionsNotAccepted shows deferred accept: a client that
// connects and says nothing costs the gateway no connection slot.
func TestSilentConnectionsNotAccepted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("deferred accept (TCP_DEFER_ACCEPT) is Linux only")
	}
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Limits.MaxConnections = 1
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Nothing is to happen: the passing of time is what is tested.
	time.Sleep(200 * time.Millisecond)
	if n := s.activeConns("edge"); n != 0 {
		t.Fatalf("%d active connections with only a silent client", n)
	}
	mustServeTLCP(t, p, s)
}

func TestMaxConnections(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Limits.MaxConnections = 1
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()
	first := dialAndSpeak(t, addr)
	defer first.Close()
	testwait.For(t, "the first connection to count", func() bool { return s.activeConns("edge") == 1 })
	second := dialAndSpeak(t, addr)
	defer second.Close()
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatal("second connection was served")
	}
	mf := scrape(t, s)
	if v, _ := metricValue(mf, "gmgate_connections_refused_total", map[string]string{"reason": "max_connections"}); v != 1 {
		t.Errorf("refused max_connections = %v, want 1", v)
	}
}

func TestProxyProtocol(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].ProxyProtocol = &config.ProxyProtocol{Trusted: []string{"127.0.0.0/8"}, Required: true}
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()

	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 5555}, c.LocalAddr())
		if _, err := h.WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		tc := tlcp.Client(c, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
	tr := &http.Transport{DialTLSContext: dial}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if !strings.Contains(body, `"X-Forwarded-For":["203.0.113.9"]`) {
		t.Errorf("upstream did not see the client address from the PROXY header: %s", body)
	}

	// Without the required header the connection is refused.
	if c, err := tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"}); err == nil {
		c.Close()
		t.Fatal("connection without a PROXY header was served")
	}
}

func TestProxyHeaderFromUntrustedPeerRefused(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].ProxyProtocol = &config.ProxyProtocol{Trusted: []string{"192.0.2.1"}}
	s := startServer(t, cfg, nil)
	c, err := net.Dial("tcp", s.Addr("edge").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := proxyproto.HeaderProxyFromAddrs(1, &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 5555}, c.LocalAddr())
	if _, err := h.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a forged PROXY header was accepted")
	}
	// Plain clients from untrusted addresses are still served.
	mustServeTLCP(t, p, s)
}

func TestReloadConfigKeepsConnections(t *testing.T) {
	p := getPKI(t)
	a := echoUpstream(t, "a")
	b := echoUpstream(t, "b")
	cfg := testConfig(p, a.URL)
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)
	get := func(path string) string {
		resp, err := client.Get(gatewayURL(s, path))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.Header.Get("X-Upstream")
	}
	if u := get("/"); u != "a" {
		t.Fatalf("before reload: %q", u)
	}
	addr := s.Addr("edge").String()

	next := testConfig(p, a.URL)
	next.Upstreams["new"] = &config.Upstream{Targets: []string{b.URL}}
	next.Listeners[0].Routes = append(next.Listeners[0].Routes, config.Route{Path: "/b/", Upstream: "new"})
	config.Defaults(next)
	if err := s.Reload(next); err != nil {
		t.Fatal(err)
	}
	if s.Addr("edge").String() != addr {
		t.Fatal("the listener was rebound")
	}
	// The keep-alive connection from before the reload takes the new route.
	reused := false
	req, _ := http.NewRequest("GET", gatewayURL(s, "/b/x"), nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	}))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if !reused || resp.Header.Get("X-Upstream") != "b" {
		t.Fatalf("after reload /b/x went to %q on a reused connection: %v", resp.Header.Get("X-Upstream"), reused)
	}
	if u := get("/"); u != "a" {
		t.Fatalf("after reload / went to %q", u)
	}

	// A configuration that cannot be set up leaves the running one.
	bad := testConfig(p, a.URL)
	bad.Listeners[0].TLCP.SignCert = "/nonexistent/sign.crt"
	if err := s.Reload(bad); err == nil {
		t.Fatal("reload with a missing certificate succeeded")
	}
	if u := get("/b/x"); u != "b" {
		t.Fatalf("after failed reload /b/x went to %q", u)
	}
	mf := scrape(t, s)
	for result, want := range map[string]float64{"success": 1, "failure": 1} {
		if v, _ := metricValue(mf, "gmgate_config_reloads_total", map[string]string{"result": result}); v != want {
			t.Errorf("reloads %s = %v, want %v", result, v, want)
		}
	}
}

func TestNewFailsWholeOnPortInUse(t *testing.T) {
	p := getPKI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(p, "http://127.0.0.1:1")
	cfg.Listeners = append(cfg.Listeners, cfg.Listeners[0])
	cfg.Listeners[1].Name = "second"
	cfg.Listeners[1].Listen = busy.Addr().String()
	if _, err := New(cfg, Options{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), cfg.Listeners[1].Path()+".listen: "+busy.Addr().String()+" is already in use") {
		t.Fatalf("New = %v, want an error naming listeners[1]", err)
	}
	// The first listener was released: nothing is left half-started (the
	// leak check at the end of the tests covers goroutines).
}

// Hostile and broken clients cost nothing once they are gone: no goroutine
// stays (the leak check at the end of the tests), no connection counted.
func TestHostileClientsLeaveNothing(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Handshake = config.Duration(200 * time.Millisecond)
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()
	inputs := [][]byte{
		nil,                                 // connect and close
		{22, 1},                             // a partial record header
		{22, 1, 1, 0xff, 0xff},              // an oversized TLCP record
		{22, 1, 1, 0, 40, 1, 0, 0, 36, 1},   // a truncated ClientHello
		{22, 3, 3, 0, 10, 1, 0, 0, 6, 3, 3}, // a truncated TLS ClientHello
		[]byte("\x16\x01\x01\x00\x05hello"), // garbage inside a record
		[]byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"),
	}
	for _, stall := range []bool{false, true} {
		for _, in := range inputs {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write(in)
			if stall {
				// Say no more: the handshake timeout must end it.
				_, _ = io.ReadAll(c)
			}
			c.Close()
		}
	}
	testwait.For(t, "every connection to be closed", func() bool {
		v, _ := metricValue(scrape(t, s), "gmgate_connections_active", map[string]string{"listener": "edge"})
		return v == 0 && s.current().handshakes["edge"].InUse() == 0
	})
	// The gateway still serves.
	mustServeTLCP(t, p, s)
}

func TestRunReloadsOnFileChange(t *testing.T) {
	p := getPKI(t)
	a := echoUpstream(t, "a")
	b := echoUpstream(t, "b")
	dir := tempDir(t)
	file := dir + "/gmgate.yaml"
	write := func(target string) {
		t.Helper()
		replaceFile(t, file, edgeConfig(p, `{listen: "off"}`, target))
	}
	write(a.URL)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *Server, 1)
	done := make(chan error, 1)
	reload := make(chan struct{})
	go func() {
		done <- Run(ctx, file, reload, Options{Logger: testLogger(t), Started: func(s *Server) { started <- s }})
	}()
	s := <-started
	client := tlcpClient(t, p, nil)
	get := func() string {
		resp, err := client.Get(gatewayURL(s, "/"))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.Header.Get("X-Upstream")
	}
	if u := get(); u != "a" {
		t.Fatalf("before: %q", u)
	}
	write(b.URL)
	testwait.For(t, "the file change to be applied", func() bool { return get() == "b" })

	// A broken file is refused and the running configuration stays.
	if err := os.WriteFile(file, []byte("listeners: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload <- struct{}{} // SIGHUP
	testwait.For(t, "the failed reload to be counted", func() bool {
		ch := make(chan prometheus.Metric, 4)
		s.metrics.Reloads.WithLabelValues("failure").Collect(ch)
		var m dto.Metric
		_ = (<-ch).Write(&m)
		return m.Counter.GetValue() >= 1
	})
	if u := get(); u != "b" {
		t.Fatalf("after a broken file: %q", u)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestReloadReplacesListener(t *testing.T) {
	p := getPKI(t)
	a := echoUpstream(t, "a")
	s := startServer(t, testConfig(p, a.URL), nil)
	old := s.Addr("edge").String()
	next := testConfig(p, a.URL)
	next.Listeners[0].Name = "edge2"
	if err := s.Reload(next); err != nil {
		t.Fatal(err)
	}
	if s.Addr("edge") != nil || s.Addr("edge2") == nil {
		t.Fatal("listeners not replaced")
	}
	if c, err := net.Dial("tcp", old); err == nil {
		c.Close()
		t.Fatal("the removed listener still accepts")
	}
	resp, err := tlcpClient(t, p, nil).Get("https://" + s.Addr("edge2").String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
}

// A client that stops reading a response does not hold the gateway or the
// upstream: the blocked write gives up after timeouts.idle.
func TestClientThatStopsReading(t *testing.T) {
	p := getPKI(t)
	finished := make(chan error, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				finished <- err
				return
			}
		}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(200 * time.Millisecond)
	cfg.Upstreams["app"].Health.Disabled = true
	s := startServer(t, cfg, nil)
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
	// Read nothing. The upstream's endless response must be cut off.
	if err := <-finished; err == nil {
		t.Fatal("upstream write did not fail")
	}
	testwait.For(t, "the connection to be closed", func() bool {
		v, _ := metricValue(scrape(t, s), "gmgate_connections_active", map[string]string{"listener": "edge"})
		return v == 0
	})
}

// Reloads while requests flow: every request is served, by one upstream
// or the other, and the race detector sees the swaps.
func TestReloadUnderTraffic(t *testing.T) {
	p := getPKI(t)
	a := echoUpstream(t, "a")
	b := echoUpstream(t, "b")
	s := startServer(t, testConfig(p, a.URL), nil)
	client := tlcpClient(t, p, nil)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	var served int
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := client.Get(gatewayURL(s, "/"))
			if err != nil {
				errc <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errc <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			served++
		}
	}()
	for i := range 20 {
		target := a.URL
		if i%2 == 0 {
			target = b.URL
		}
		if err := s.Reload(testConfig(p, target)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if served == 0 {
		t.Fatal("no request was served")
	}
}

package proxy

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2ClientThatStopsReadingIsCut: an HTTP/2 client that stops
// taking a response (it grants no flow-control window, and answers PINGs
// so that its connection looks alive) holds its request, and the
// upstream's, only for timeouts.idle, as an HTTP/1 client that stops
// reading does: otherwise a few connections of 128 such streams each
// hold every upstream connection for ever.
func TestHTTP2ClientThatStopsReadingIsCut(t *testing.T) {
	p := getPKI(t)
	const idle = 300 * time.Millisecond
	gone := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range 1024 { // 32 MiB, more than any buffer on the way
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		gone <- struct{}{}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)

	c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	// No window for response bodies, now or later.
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/big"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// Read frames (answering PINGs and acknowledging SETTINGS) until
	// the upstream's request ends.
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			}
		}
	}()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the upstream's response was still held 10 s after the HTTP/2 client stopped taking it (idle %v)", idle)
	}
}

// TestHTTP2QuietStreamNotCut: the bound of TestHTTP2ClientThatStopsReadingIsCut
// is on writes that wait for the client, not on a response that is quiet
// for longer than timeouts.idle (server-sent events, a long poll).
func TestHTTP2QuietStreamNotCut(t *testing.T) {
	p := getPKI(t)
	const idle = 300 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(3 * idle)
		}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)
	resp, err := h2TLSClient(t, p).Get("https://" + s.Addr("edge").String() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || err != nil || string(body) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Fatalf("HTTP/%d, %q, %v", resp.ProtoMajor, body, err)
	}
}

// TestHTTP2BodyFailureEndsOnlyItsStream: over HTTP/2 a request whose body
// stops arriving is answered 408 and ends alone; the connection, which
// carries other requests (many users' behind a CDN), stays open and takes
// the next request. Over HTTP/1.1 the connection closes (the unread body
// is in its way; TestRequestBodyTimeout).
func TestHTTP2BodyFailureEndsOnlyItsStream(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	s := startServer(t, cfg, nil)
	client, negotiated := h2TLCPClient(t, p, []string{"h2"})

	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("the first bytes"))
	resp, err := client.Post(gatewayURL(s, "/upload"), "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.ProtoMajor != 2 {
		t.Fatalf("stalled body: %s %d %q; want 408 over HTTP/2", resp.Proto, resp.StatusCode, body)
	}

	resp, err = client.Get(gatewayURL(s, "/after"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("next request: %d, want the upstream's 201", resp.StatusCode)
	}
	if got := negotiated(); len(got) != 1 {
		t.Errorf("connections made: %d (%s), want the first one kept after the 408", len(got), strings.Join(got, ","))
	}
}

// h2Status sends one HTTP/2 request made of fields (name, value, ...) to
// the gateway's TLS side, frame by frame, so that it may hold what Go's
// client would not send, and returns the response's :status ("" when
// the stream or the connection ended without one).
func h2Status(t *testing.T, p *testPKI, s *Server, fields ...string) string {
	t.Helper()
	c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return ""
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return f.PseudoValue("status")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return ""
			}
		}
	}
}

// TestInformationalResponsesLoseHopByHop: a 1xx response (103 Early
// Hints) is passed to the client without the upstream's hop-by-hop
// headers, as the final response is. In HTTP/2 they make the response
// malformed (RFC 9113 §8.2.2): browsers and curl fail the request.
func TestInformationalResponsesLoseHopByHop(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Link", "</app.css>; rel=preload")
		h.Set("Connection", "keep-alive, X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Connection", "keep-alive")
		h.Set("Upgrade", "h2c")
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		_, _ = w.Write([]byte("ok"))
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	for name, client := range map[string]*http.Client{"http1": tlsClient(t, p), "http2": h2TLSClient(t, p)} {
		var hints []textproto.MIMEHeader
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, h)
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", gatewayURL(s, "/hints"), nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		readAll(t, resp)
		if len(hints) != 1 || hints[0].Get("Link") == "" {
			t.Fatalf("%s: 1xx responses %v", name, hints)
		}
		for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade"} {
			if v, ok := hints[0][k]; ok {
				t.Errorf("%s: the 103 response passed on %s: %q", name, k, v)
			}
		}
	}
}

// TestHTTP2AuthorityChecked: an HTTP/2 request's :authority is held to
// what HTTP/1.1 asks of Host (net/http answers 400 to a bad one), since
// Go's HTTP/2 server takes any text there. Such a host reached the
// upstream in X-Forwarded-Host and Forwarded, where applications build
// links from it, while its Host header went out empty. A request with
// neither :authority nor Host reached it with the target's address as
// its Host.
func TestHTTP2AuthorityChecked(t *testing.T) {
	p := getPKI(t)
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	request := func(authority string) []string {
		return []string{":method", "GET", ":scheme", "https", ":authority", authority, ":path", "/"}
	}
	for _, bad := range []string{"localhost evil.example", "localhost/reset?to=evil.example", `localhost"`, "localhost\\x", "localhost{x}"} {
		if got := h2Status(t, p, s, request(bad)...); got != "400" {
			t.Errorf(":authority %q: status %q, want 400", bad, got)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests with a bad :authority reached the upstream", n)
	}
	// Neither :authority nor Host: malformed (RFC 9113 §8.3.1).
	if got := h2Status(t, p, s, ":method", "GET", ":scheme", "https", ":path", "/"); got != "400" {
		t.Errorf("neither :authority nor Host: status %q, want 400", got)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests with a bad or no :authority reached the upstream", n)
	}
	for _, good := range []string{"localhost", "localhost:443", "LOCALHOST.", "127.0.0.1", "[::1]:443"} {
		if got := h2Status(t, p, s, request(good)...); got != "200" {
			t.Errorf(":authority %q: status %q, want 200", good, got)
		}
	}
	if got := h2Status(t, p, s, ":method", "GET", ":scheme", "https", ":path", "/", "host", "localhost"); got != "200" {
		t.Errorf("Host without :authority: status %q, want 200", got)
	}
}

// TestRequestTrailersForwarded: trailers a client sends after its request
// body reach the upstream with their values, from HTTP/1.1 and HTTP/2
// clients, to HTTP/1.1 and HTTP/2 upstreams. ReverseProxy copies the
// request's trailer before the body has been read, so the upstream got
// the names with no values.
func TestRequestTrailersForwarded(t *testing.T) {
	p := getPKI(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", body, r.Trailer.Get("X-Checksum"))
	})
	h1 := httptest.NewServer(h)
	defer h1.Close()
	h2cAddr := h2cUpstream(t, h)
	for _, target := range []string{h1.URL, "h2c://" + h2cAddr} {
		s := startServer(t, testConfig(p, target), nil)
		for name, client := range map[string]*http.Client{"http1": tlsClient(t, p), "http2": h2TLSClient(t, p)} {
			req, _ := http.NewRequest("PUT", gatewayURL(s, "/upload"), io.NopCloser(strings.NewReader("payload")))
			req.ContentLength = -1
			req.Trailer = http.Header{"X-Checksum": {"c0ffee"}}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s to %s: %v", name, target, err)
			}
			if body := readAll(t, resp); body != "payload c0ffee" {
				t.Errorf("%s to %s: the upstream read %q, want the body and the trailer's value", name, target, body)
			}
		}
	}
}

// TestUpgradeNotSentOverHTTP2: a request that offers to switch protocols
// (WebSocket, say) and goes to an upstream over HTTP/2, which has no such
// switch, is sent as the plain request it also is. net/http's HTTP/2
// client refused it before sending anything, which counted as a failure
// of the target: every such request got 502, and a few of them ejected
// the target for everyone.
func TestUpgradeNotSentOverHTTP2(t *testing.T) {
	p := getPKI(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upgrade=%q connection=%q", r.Header.Get("Upgrade"), r.Header.Get("Connection"))
	})
	h2cAddr := h2cUpstream(t, app)
	tlsApp := httptest.NewUnstartedServer(app)
	tlsApp.EnableHTTP2 = true
	tlsApp.StartTLS()
	defer tlsApp.Close()
	httpsCfg := testConfig(p, tlsApp.URL)
	httpsCfg.Upstreams["app"].HTTP2 = true
	httpsCfg.Upstreams["app"].TLS = &config.UpstreamTLS{InsecureSkipVerify: true}
	plainApp := httptest.NewServer(app)
	defer plainApp.Close()
	id, _ := clientIdentity(t, p)
	svc := tlcpService(t, p, plainApp.URL)
	tlcpGW, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, "ECC_SM4_GCM_SM3"), "http2: true")

	for _, c := range []struct {
		name, url, upgrade string
		client             *http.Client
	}{
		{"h2c", gatewayURL(startServer(t, testConfig(p, "h2c://"+h2cAddr), nil), "/ws"), "websocket", tlsClient(t, p)},
		// WebSocket goes to an https:// target over HTTP/1.1; other
		// upgrades go over HTTP/2 when the target speaks it.
		{"https", gatewayURL(startServer(t, httpsCfg, nil), "/ws"), "example/1", tlsClient(t, p)},
		{"tlcp", "http://" + tlcpGW.Addr("app").String() + "/ws", "websocket", &http.Client{Timeout: 20 * time.Second}},
	} {
		for i := range 4 {
			req, _ := http.NewRequest("GET", c.url, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", c.upgrade)
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != `upgrade="" connection=""` {
				t.Errorf("%s, request %d: %d %q, want the upstream's answer to the plain request", c.name, i, resp.StatusCode, body)
			}
		}
	}
}

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// TestPOSTKeepsConnection: an HTTP/1.1 POST whose upstream answers once it
// has read the whole body leaves the client's connection open for the
// next request, whatever the body's framing: only a response that starts
// while the body is still coming is sent full duplex and closes the
// connection.
func TestPOSTKeepsConnection(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "got %q", body)
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for _, req := range []string{
		"POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
		"POST /b HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
	} {
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || body != `got "hello"` {
			t.Fatalf("%q: %d %q", req, resp.StatusCode, body)
		}
		if resp.Close {
			t.Fatalf("%q: the response closes the connection", req)
		}
	}
}

// TestUnreadRequestBodyTimeout: timeouts.request_body bounds a body's
// pauses also when gmgate answers without forwarding it (no route, 421,
// a redirect, an upstream that is down or answers before reading it): net/http
// reads what is left of such a body before it writes the answer, and a
// client that stops sending must not hold its connection, unanswered,
// for ever.
func TestUnreadRequestBodyTimeout(t *testing.T) {
	p := getPKI(t)
	// An upstream that refuses a request as soon as its header is in,
	// without waiting for the body.
	up := testnet.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n")
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	cfg := testConfig(p, "http://"+up)
	cfg.Listeners[0].Routes = []config.Route{{Path: "/app/", Upstream: "app"}, {Path: "/down/", Upstream: "down"}}
	cfg.Upstreams["down"] = &config.Upstream{Targets: []string{"http://" + closedAddr(t)}, Health: config.Health{Disabled: true}}
	config.Defaults(cfg)
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	s := startServer(t, cfg, nil)

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/app/upload", http.StatusUnauthorized},
		{"/elsewhere", http.StatusNotFound},
		{"/down/upload", http.StatusBadGateway},
	} {
		c := dialTLCP(t, p, s)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nthe first bytes", tc.path)
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s with a stalled body: no answer after %v: %v", tc.path, time.Since(start), err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status || !resp.Close {
			t.Errorf("POST %s with a stalled body: %d, close %v; want %d and the connection closed", tc.path, resp.StatusCode, resp.Close, tc.status)
		}
	}
}

// TestUploadToStalledUpstreamEnds: an upstream that takes a request's
// header and then stops reading its body (a hung process, its socket
// open) is given up after timeouts.idle: timeouts.upstream_response only
// counts once the request is written, and the client's body is not idle
// (gmgate is the one not reading), so nothing else ends the request.
func TestUploadToStalledUpstreamEnds(t *testing.T) {
	p := getPKI(t)
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"http", "tlcp"} {
		t.Run(scheme, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			up := testnet.Serve(t, func(c net.Conn) {
				if scheme == "tlcp" {
					c = tlcp.Server(c, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}})
				}
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				<-release // reads nothing more
			})
			cfg := testConfig(p, scheme+"://"+up)
			cfg.Timeouts.Idle = config.Duration(300 * time.Millisecond)
			cfg.Upstreams["app"].Health.Disabled = true
			if scheme == "tlcp" {
				cfg.Upstreams["app"].TLCP = &config.UpstreamTLCP{CA: p.dual.CACert, ServerName: "localhost"}
				config.Defaults(cfg)
			}
			s := startServer(t, cfg, nil)

			pr, pw := io.Pipe()
			defer pw.Close()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					if _, err := pw.Write(buf); err != nil {
						return
					}
				}
			}()
			client := tlcpClient(t, p, nil)
			client.Timeout = 15 * time.Second
			start := time.Now()
			resp, err := client.Post(gatewayURL(s, "/upload"), "application/octet-stream", pr)
			d := time.Since(start)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusGatewayTimeout {
					t.Errorf("upload to an upstream that stopped reading: %d, want 504", resp.StatusCode)
				}
			}
			if d > 10*time.Second {
				t.Fatalf("upload to an upstream that stopped reading still going after %v (idle 300ms): %v", d, err)
			}
		})
	}
}

// trickle writes a byte to w every gap, n at most, until a write fails
// or stop is closed.
func trickle(w io.Writer, n int, gap time.Duration, stop <-chan struct{}) {
	for range n {
		if _, err := w.Write([]byte{'x'}); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
	}
}

// bodyReader is an upstream that reads request bodies whole and counts
// those it is reading.
func bodyReader(t *testing.T, reading *atomic.Int64) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reading.Add(1)
		defer reading.Add(-1)
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "read %d bytes", n)
	}))
	t.Cleanup(up.Close)
	return up
}

// A body that sends a byte within each request_body, but fewer than
// request_body_min_rate a second, is cut with 408 once its first
// request_body of grace is spent, over HTTP/1.1 and HTTP/2, and its
// upstream request ends; one as slow whose response has started (a
// bidirectional stream) is not.
func TestTricklingBodyCut(t *testing.T) {
	p := getPKI(t)
	var reading atomic.Int64
	up := bodyReader(t, &reading)
	cfg := testConfig(p, up.URL)
	const idle, gap = 500 * time.Millisecond, 100 * time.Millisecond
	rate := 20 // a byte every 100 ms is half of it
	cfg.Timeouts.RequestBody = config.Duration(idle)
	cfg.Timeouts.RequestBodyMinRate = &rate
	s := startServer(t, cfg, nil)
	const length = 100 // 10 s at a byte every 100 ms

	t.Run("HTTP/1.1", func(t *testing.T) {
		c := dialTLCP(t, p, s)
		start := time.Now()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n", length)
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, length, gap, stop)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a trickling body: %d after %v, want 408", resp.StatusCode, time.Since(start))
		}
		t.Logf("cut after %v", time.Since(start))
	})

	t.Run("HTTP/2", func(t *testing.T) {
		pr, pw := io.Pipe()
		stop := make(chan struct{})
		defer close(stop)
		go func() { trickle(pw, length, gap, stop); pw.Close() }()
		req, _ := http.NewRequest(http.MethodPost, "https://"+s.Addr("edge").String()+"/", pr)
		req.ContentLength = length
		start := time.Now()
		resp, err := h2TLSClient(t, p).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a trickling body over HTTP/%d: %d after %v, want 408", resp.ProtoMajor, resp.StatusCode, time.Since(start))
		}
		t.Logf("cut after %v", time.Since(start))
	})
	testwait.For(t, "the upstream requests to end", func() bool { return reading.Load() == 0 })

	t.Run("answered stream", func(t *testing.T) {
		// The upstream answers at once, then echoes each byte: the
		// client sends a byte every 100 ms, as slowly as above, for
		// well past the grace, and gets every byte back.
		echo := h2cUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			b := make([]byte, 1)
			for {
				if _, err := r.Body.Read(b); err != nil {
					return
				}
				_, _ = w.Write(b)
				_ = rc.Flush()
			}
		}))
		cfg := testConfig(p, "h2c://"+echo)
		cfg.Timeouts.RequestBody = config.Duration(idle)
		cfg.Timeouts.RequestBodyMinRate = &rate
		s := startServer(t, cfg, nil)
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://"+s.Addr("edge").String()+"/", pr)
		resp, err := h2TLSClient(t, p).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		const n = 30 // 3 s: six times the grace
		b := make([]byte, 1)
		for i := range n {
			if _, err := pw.Write([]byte{'x'}); err != nil {
				t.Fatalf("byte %d: %v", i, err)
			}
			if _, err := io.ReadFull(resp.Body, b); err != nil {
				t.Fatalf("the echo of byte %d: %v; an answered stream was cut", i, err)
			}
			time.Sleep(gap) // the client's pace, not a wait for an event
		}
		pw.Close()
		if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
			t.Fatalf("the stream's end: %q %v", rest, err)
		}
	})
}

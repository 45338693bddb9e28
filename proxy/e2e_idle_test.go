package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// rawClient is one client connection used by hand, so that the tests
// know which connection each request goes on.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, p *testPKI, s *Server, protocol string) *rawClient {
	t.Helper()
	addr := s.Addr("edge").String()
	var c net.Conn
	var err error
	if protocol == "tls" {
		c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})
	} else {
		c, err = tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, br: bufio.NewReader(c)}
}

// get sends raw (one or more requests) and reads n responses.
func (c *rawClient) get(raw string, n int) {
	c.t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			c.t.Fatalf("response %d: %v", i+1, err)
		}
		readAll(c.t, resp)
		if resp.Header.Get("X-Upstream") != "app" {
			c.t.Fatalf("response %d: %d, not from the upstream", i+1, resp.StatusCode)
		}
	}
}

const getRequest = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"

func parkedCount(s *Server) int {
	return s.parkedConns("edge")
}

// goroutinesIn counts goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestIdleConnectionsPark checks that a keep-alive connection that stays
// idle leaves the HTTP server (no goroutine of net/http holds it) and is
// served again, on the same connection, when its next request comes: a
// request alone, two pipelined, and one that arrives in two pieces.
func TestIdleConnectionsPark(t *testing.T) {
	for _, protocol := range []string{"tlcp", "tls"} {
		t.Run(protocol, func(t *testing.T) {
			p := getPKI(t)
			up := echoUpstream(t, "app")
			s := startServer(t, testConfig(p, up.URL), nil)
			c := dialRaw(t, p, s, protocol)
			c.get(getRequest, 1)
			testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
			// Without parking, the HTTP server's goroutine would wait in
			// httpConn.Read.
			if n := goroutinesIn("edge.(*HTTPConn).Read"); n != 0 {
				t.Fatalf("%d goroutines read client connections while the only one is parked", n)
			}
			if n := goroutinesIn("edge.(*ConnListener).waitParked"); n != 1 {
				t.Fatalf("%d goroutines wait for parked connections, want 1", n)
			}

			c.get(getRequest, 1)
			testwait.For(t, "the connection to be parked again", func() bool { return parkedCount(s) == 1 })
			c.get(getRequest+getRequest, 2)
			testwait.For(t, "the connection to be parked again", func() bool { return parkedCount(s) == 1 })

			// The first piece wakes the connection; the HTTP server then
			// reads the rest.
			if _, err := io.WriteString(c.conn, getRequest[:7]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * edge.IdleParkAfter)
			c.get(getRequest[7:], 1)
		})
	}
}

// TestParkedConnectionsKeepIdleTimeout checks that timeouts.idle still
// closes a parked connection, counted from the end of its last response,
// and that shutdown closes parked connections at once.
func TestParkedConnectionsKeepIdleTimeout(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	cfg := testConfig(p, up.URL)
	const idle = 1500 * time.Millisecond
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)

	c := dialRaw(t, p, s, "tlcp")
	c.get(getRequest, 1)
	done := time.Now()
	testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF when the server closes it", err)
	}
	if d := time.Since(done); d < idle-100*time.Millisecond || d > idle+2*time.Second {
		t.Fatalf("closed %v after the response, idle timeout %v", d, idle)
	}
	testwait.For(t, "the parked connection to be forgotten", func() bool { return parkedCount(s) == 0 })

	c2 := dialRaw(t, p, s, "tlcp")
	c2.get(getRequest, 1)
	testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c2.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.br.ReadByte(); err != io.EOF {
		t.Fatalf("parked connection at shutdown: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a parked connection", d)
	}
}

// streamingUpstream answers at once, while the request body may still be
// on its way, with ?ticks= lines 100 ms apart, then "done", or with ?hang
// nothing more until the request ends.
func streamingUpstream(t *testing.T, h2c bool) *httptest.Server {
	// An HTTP/1 server does not watch a full-duplex request's connection
	// for its end; the test's end stops a hanging handler.
	testEnd := make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctl := http.NewResponseController(w)
		_ = ctl.EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		_ = ctl.Flush()
		ticks, _ := strconv.Atoi(r.URL.Query().Get("ticks"))
		for range ticks {
			_, _ = io.WriteString(w, "tick\n")
			_ = ctl.Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Query().Has("hang") {
			select {
			case <-r.Context().Done():
			case <-testEnd:
			}
			return
		}
		_, _ = io.WriteString(w, "done\n")
	}))
	if h2c {
		up.Config.Protocols = &http.Protocols{}
		up.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	up.Start()
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(testEnd) })
	return up
}

// While the response streams to the client, timeouts.request_body counts
// the time with nothing moving either way: a client that says nothing
// more after its first bytes (a bidirectional gRPC call whose client
// only listens) is not cut while the response keeps coming; a stream
// quiet both ways is.
func TestRequestBodyIdleCountsResponse(t *testing.T) {
	// A second of idle: ten ticks of the response fit in it, so that a
	// slow scheduler (a loaded CI machine, an emulated CPU) delaying one
	// tick does not look like a quiet stream.
	const idle = time.Second
	p := getPKI(t)
	for _, tc := range []struct {
		name   string
		client func() *http.Client
		h2c    bool
	}{
		{"http2", func() *http.Client { c, _ := h2TLCPClient(t, p, []string{"h2"}); return c }, true},
		{"http1.1 chunked", func() *http.Client { return tlcpClient(t, p, nil) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := streamingUpstream(t, tc.h2c)
			target := up.URL
			if tc.h2c {
				target = "h2c://" + strings.TrimPrefix(up.URL, "http://")
			}
			cfg := testConfig(p, target)
			cfg.Timeouts.RequestBody = config.Duration(idle)
			s := startServer(t, cfg, nil)
			client := tc.client()

			// call sends a request body's first bytes and then nothing,
			// and returns what the response brought and how it ended.
			call := func(query string) (string, error) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				pr, pw := io.Pipe()
				defer pw.Close()
				go func() { _, _ = io.WriteString(pw, "hello\n") }()
				req, _ := http.NewRequestWithContext(ctx, "POST", gatewayURL(s, "/stream?"+query), pr)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", query, resp.Status)
				}
				var got strings.Builder
				_, err = io.Copy(&got, bufio.NewReader(resp.Body))
				if ctx.Err() != nil {
					t.Fatalf("%s: the response was still open after 20 s", query)
				}
				return got.String(), err
			}

			// 25 lines, 2.5 s in all: two and a half times request_body.
			if got, err := call("ticks=25"); err != nil || got != strings.Repeat("tick\n", 25)+"done\n" {
				t.Errorf("a quiet client of a moving response: %q, %v; want the whole response", got, err)
			}
			got, err := call("ticks=1&hang")
			if err == nil || errors.Is(err, context.DeadlineExceeded) || got != "tick\n" {
				t.Errorf("a stream quiet both ways: %q, %v; want it cut", got, err)
			}
		})
	}
}

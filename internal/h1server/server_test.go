package h1server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testServer serves h on a loopback listener; fallbacks counts the
// connections it handed to net/http's server.
type testServer struct {
	*Server
	addr      string
	fallbacks atomic.Int32
}

func newTestServer(t *testing.T, h http.Handler, set func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := newChanListener(ln.Addr())
	fullSrv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	go fullSrv.Serve(full)
	ts := &testServer{addr: ln.Addr().String()}
	ts.Server = &Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		Fallback: func(c net.Conn, unread []byte) bool {
			ts.fallbacks.Add(1)
			return full.push(&replayConn{Conn: c, unread: unread})
		}}
	if set != nil {
		set(ts.Server)
	}
	go ts.Serve(ln)
	t.Cleanup(func() { ts.Close(); ln.Close(); full.Close(); fullSrv.Close() })
	return ts
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, req string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
})

// A request this server does not take on goes, with the rest of its
// connection, to the fallback: read from its first byte, body and all.
func TestFallbackTakesTheRestOfTheConnection(t *testing.T) {
	ts := newTestServer(t, echoBody, nil)
	c, br := dial(t, ts.addr)
	if _, body := roundTrip(t, c, br, "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"); body != "GET /one " {
		t.Fatalf("first: %q", body)
	}
	if n := ts.fallbacks.Load(); n != 0 {
		t.Fatalf("a GET went to the fallback")
	}
	if _, body := roundTrip(t, c, br, "POST /two HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"); body != "POST /two hello" {
		t.Fatalf("second: %q", body)
	}
	if _, body := roundTrip(t, c, br, "GET /three HTTP/1.1\r\nHost: a\r\n\r\n"); body != "GET /three " {
		t.Fatalf("third: %q", body)
	}
	if n := ts.fallbacks.Load(); n != 1 {
		t.Fatalf("%d hand-overs, want 1", n)
	}
	// A header longer than this server's buffer goes too.
	c2, br2 := dial(t, ts.addr)
	long := "GET /long HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("x", 5000) + "\r\n\r\n"
	if _, body := roundTrip(t, c2, br2, long); body != "GET /long " {
		t.Fatalf("long: %q", body)
	}
	if n := ts.fallbacks.Load(); n != 2 {
		t.Fatalf("%d hand-overs, want 2", n)
	}
}

// A connection that waits ParkAfter for its next request is handed to
// Park with the idle deadline, and not closed.
func TestIdleConnectionIsParked(t *testing.T) {
	type parked struct {
		c        net.Conn
		deadline time.Time
	}
	got := make(chan parked, 1)
	start := time.Now()
	ts := newTestServer(t, echoBody, func(s *Server) {
		s.IdleTimeout = time.Hour
		s.ParkAfter = 20 * time.Millisecond
		s.Park = func(c net.Conn, deadline time.Time) bool {
			got <- parked{c, deadline}
			return true
		}
	})
	c, br := dial(t, ts.addr)
	roundTrip(t, c, br, "GET /one HTTP/1.1\r\nHost: a\r\n\r\n")
	p := <-got
	if p.deadline.Before(start.Add(time.Hour)) || p.deadline.After(time.Now().Add(time.Hour)) {
		t.Errorf("parked until %v, want an hour after the response", p.deadline)
	}
	// The server let go of it: the parked side reads it now (its wait
	// sets a deadline of its own).
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(p.c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("parked connection: %q, %v", buf, err)
	}
}

// A connection Park declines keeps waiting here until the idle timeout.
func TestIdleConnectionNotParkedWaitsOn(t *testing.T) {
	declined := make(chan struct{}, 1)
	ts := newTestServer(t, echoBody, func(s *Server) {
		s.ParkAfter = 10 * time.Millisecond
		s.Park = func(net.Conn, time.Time) bool {
			declined <- struct{}{}
			return false
		}
	})
	c, br := dial(t, ts.addr)
	roundTrip(t, c, br, "GET /one HTTP/1.1\r\nHost: a\r\n\r\n")
	<-declined
	if _, body := roundTrip(t, c, br, "GET /two HTTP/1.1\r\nHost: a\r\n\r\n"); body != "GET /two " {
		t.Fatalf("after a declined park: %q", body)
	}
}

// Shutdown closes the connections waiting for a request and waits for a
// response in progress, which says Connection: close.
func TestShutdownWaitsForResponses(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	}), nil)
	idle, ibr := dial(t, ts.addr)
	roundTrip(t, idle, ibr, "GET /quick HTTP/1.1\r\nHost: a\r\n\r\n")
	busy, bbr := dial(t, ts.addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- ts.Shutdown(context.Background()) }()
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a response in progress", err)
	default:
	}
	close(release)
	resp, err := http.ReadResponse(bbr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Errorf("the last response does not say Connection: close")
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// goneConn cancels its connection's context when a read fails other than
// by a timeout, as the gateway's client connections do.
type goneConn struct {
	net.Conn
	cancel context.CancelFunc
}

func (c *goneConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.cancel()
	}
	return n, err
}

type goneListener struct{ net.Listener }

func (l goneListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &goneConn{Conn: c}, nil
}

// A client that goes away while its request's handler runs is seen by
// the background read: the request's context ends.
func TestClientGoneEndsContext(t *testing.T) {
	ended := make(chan error, 1)
	srv := &Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
				ended <- nil
			case <-time.After(10 * time.Second):
				ended <- errors.New("the context did not end")
			}
		}),
		ErrorLog:   log.New(io.Discard, "", 0),
		WatchAfter: time.Millisecond,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			c.(*goneConn).cancel = cancel
			return ctx
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(goneListener{ln})
	t.Cleanup(func() { srv.Close(); ln.Close() })
	c, _ := dial(t, ln.Addr().String())
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
	c.Close()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}

// A request that follows while the handler of the one before runs long
// (and the background read may take its first byte) is served whole.
func TestPipelinedDuringBackgroundRead(t *testing.T) {
	var once sync.Once
	release := make(chan struct{})
	entered := make(chan struct{})
	ts := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			once.Do(func() { close(entered) })
			<-release
		}
		io.WriteString(w, r.URL.Path)
	}), func(s *Server) { s.WatchAfter = time.Nanosecond })
	c, br := dial(t, ts.addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	close(release)
	for _, want := range []string{"/slow", "/next"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != want {
			t.Fatalf("got %q, want %q", body, want)
		}
	}
}

// A header that does not come whole within ReadHeaderTimeout ends the
// connection.
func TestSlowHeaderTimesOut(t *testing.T) {
	ts := newTestServer(t, echoBody, func(s *Server) { s.ReadHeaderTimeout = 100 * time.Millisecond })
	c, br := dial(t, ts.addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("got %v, want EOF", err)
	}
}

// A handler that hijacks the connection while it is read in the
// background gets every byte the client sends after the request.
func TestHijackDuringBackgroundRead(t *testing.T) {
	entered := make(chan struct{})
	sent := make(chan struct{})
	got := make(chan string, 1)
	ts := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-sent
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		line, _ := brw.ReadString('\n')
		got <- line
	}), func(s *Server) { s.WatchAfter = time.Nanosecond })
	c, _ := dial(t, ts.addr)
	io.WriteString(c, "GET /hijack HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	io.WriteString(c, "after the request\n")
	close(sent)
	if line := <-got; line != "after the request\n" {
		t.Fatalf("hijacker read %q", line)
	}
}

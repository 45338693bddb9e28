package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
)

// Requests without a body leave as the Transport writes them, byte for
// byte; the ones it refuses are refused.
func TestAppendRequestMatchesNetHTTP(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	methods := []string{"GET", "HEAD", "DELETE", "OPTIONS", "POST", "PUT", "PATCH", "TRACE", "PROPFIND", ""}
	hosts := []string{"api.example.cn", "127.0.0.1:8080", "[::1]:443", "", "xn--fsq.example", "a_b.example:1", "中文.example", "[fe80::1%25eth0]:80", "bad host"}
	names := []string{"Accept", "Accept-Encoding", "Cookie", "X-Forwarded-For", "X-Real-Ip", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer", "Host", "Te", "X-A", "Zz", "a-lower", "X-Empty"}
	values := []string{"", "v", " padded\t", "a, b", "text/html; q=0.9", "é", "x\ty", strings.Repeat("long", 100)}
	paths := []string{"/", "/a/b", "/a%20b", "/p;q", "", "/中", "/x?y=1", "*"}
	for i := range 5000 {
		u := &url.URL{Scheme: "http", Host: "10.0.0.5:8080", Path: paths[r.IntN(len(paths))]}
		if i%3 == 0 {
			u.RawQuery = "q=" + fmt.Sprint(i) + "&r=%41"
		}
		if i%11 == 0 {
			u.ForceQuery = true
		}
		req := &http.Request{Method: methods[r.IntN(len(methods))], URL: u, Host: hosts[r.IntN(len(hosts))], Header: http.Header{}}
		for range r.IntN(8) {
			name := names[r.IntN(len(names))]
			for range 1 + r.IntN(2) {
				req.Header[name] = append(req.Header[name], values[r.IntN(len(values))])
			}
		}
		if i%13 == 0 {
			req.Header["User-Agent"] = nil
		}
		var want bytes.Buffer
		if err := req.Write(&want); err != nil {
			t.Fatalf("%d: net/http: %v", i, err)
		}
		got, err := appendRequest(nil, req)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if string(got) != want.String() {
			t.Fatalf("request %d:\n got %q\nwant %q", i, got, want.String())
		}
	}

	for _, tc := range []struct {
		name string
		edit func(*http.Request)
		want string
	}{
		{"header name", func(r *http.Request) { r.Header["Bad Name"] = []string{"x"} }, `invalid header field name "Bad Name"`},
		{"header value", func(r *http.Request) { r.Header["X-Secret"] = []string{"a\r\nInjected: 1"} }, `invalid header field value for "X-Secret"`},
		{"method", func(r *http.Request) { r.Method = "GET /x" }, `invalid method "GET /x"`},
		{"control character in the URL", func(r *http.Request) { r.URL.RawQuery = "a=\x01" }, "control character"},
	} {
		req := &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "h", Path: "/"}, Host: "h", Header: http.Header{}}
		tc.edit(req)
		if _, err := appendRequest(nil, req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		if strings.Contains(tc.want, "Injected") {
			t.Errorf("%s: the value is in the error", tc.name)
		}
	}
}

// Whatever the request, the client writes what net/http writes, or
// refuses it where the Transport refuses it: before dialing (a method,
// header name or value it does not accept) or as it writes (a Host or
// URL it cannot write).
func FuzzAppendRequest(f *testing.F) {
	f.Add("GET", "/a/b", "q=1", "api.example.cn", "Accept", "*/*", "User-Agent", "")
	f.Add("", "/", "", "127.0.0.1:8080", "Cookie", "a=1", "Cookie", "b=2")
	f.Add("POST", "/submit", "", "[::1]:443", "Idempotency-Key", "k", "X-Empty", "")
	f.Add("HEAD", "/中", "a=%zz", "中文.example", "X-A", " padded\t", "Content-Length", "5")
	f.Add("GET /x", "/", "", "h", "Bad Name", "v", "X-Secret", "a\r\nInjected: 1")
	f.Add("DELETE", "*", "a=\x01", "[fe80::1%25eth0]:80", "Host", "other", "Transfer-Encoding", "chunked")
	f.Add("PUT", "", "", "bad host", "Trailer", "X", "User-Agent", "curl/8")
	f.Add("OPTIONS", "/p;q", "", "", "Te", "trailers", "Zz", "x\ty")
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errDialed
	}}
	f.Fuzz(func(t *testing.T, method, path, query, host, k1, v1, k2, v2 string) {
		req := &http.Request{
			Method: method,
			URL:    &url.URL{Scheme: "http", Host: "10.0.0.5:8080", Path: path, RawQuery: query},
			Host:   host,
			Header: http.Header{},
		}
		req.Header[k1] = append(req.Header[k1], v1)
		req.Header[k2] = append(req.Header[k2], v2)
		got, err := appendRequest(nil, req)
		var want bytes.Buffer
		werr := req.Write(&want)
		_, terr := tr.RoundTrip(req.Clone(context.Background()))
		refusedBeforeDial := !errors.Is(terr, errDialed)
		switch {
		case err == nil && (refusedBeforeDial || werr != nil):
			t.Fatalf("written, refused by net/http (before dialing: %v; writing: %v)", terr, werr)
		case err == nil && string(got) != want.String():
			t.Fatalf("\n got %q\nwant %q", got, want.String())
		case err != nil && !refusedBeforeDial && werr == nil:
			t.Fatalf("refused (%v), net/http writes %q", err, want.String())
		case err != nil && len(v1) > 3 && strings.Contains(err.Error(), v1) && !strings.Contains(k1, v1):
			t.Fatalf("the error %q shows a header value", err)
		}
	})
}

var errDialed = errors.New("dialed")

// scriptedUpstream accepts connections and runs serve on each; it counts
// the connections.
type scriptedUpstream struct {
	addr  string
	conns atomic.Int32
}

func newScriptedUpstream(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) *scriptedUpstream {
	t.Helper()
	u := &scriptedUpstream{}
	u.addr = testnet.Serve(t, func(c net.Conn) {
		serve(int(u.conns.Add(1)), c, bufio.NewReader(c))
	})
	return u
}

func testH1Client(timeout time.Duration) *Client {
	return New(Options{
		Dial:                   (&net.Dialer{Timeout: time.Second}).DialContext,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 8 << 10,
	})
}

func h1Get(t *testing.T, c *Client, addr, method, path string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, nil)
	resp, err := c.RoundTrip(req, addr)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// Every kind of response leaves its connection ready for the next request,
// except one that closes it.
func TestH1ClientKeepsConnections(t *testing.T) {
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			switch req.URL.Path {
			case "/length":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			case "/chunked":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n")
			case "/204":
				fmt.Fprint(c, "HTTP/1.1 204 No Content\r\n\r\n")
			case "/head":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			case "/close":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
				return
			}
		}
	})
	c := testH1Client(5 * time.Second)
	defer c.CloseIdle()
	tg := up.addr
	for _, step := range []struct{ method, path, body string }{
		{"GET", "/length", "hello"}, {"GET", "/chunked", "abcde"}, {"GET", "/204", ""}, {"HEAD", "/head", ""},
		{"DELETE", "/length", "hello"}, {"GET", "/length", "hello"},
	} {
		resp, body, err := h1Get(t, c, tg, step.method, step.path)
		if err != nil || body != step.body {
			t.Fatalf("%s %s: %q %v", step.method, step.path, body, err)
		}
		if step.path == "/chunked" && resp.Trailer.Get("X-Sum") != "5" {
			t.Errorf("trailer %v", resp.Trailer)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("%d connections for six requests, want 1", n)
	}
	if _, body, err := h1Get(t, c, tg, "GET", "/close"); err != nil || body != "ok" {
		t.Fatalf("/close: %q %v", body, err)
	}
	if _, _, err := h1Get(t, c, tg, "GET", "/length"); err != nil {
		t.Fatal(err)
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("%d connections after a response that closed its own, want 2", n)
	}
}

// A target that closes a kept-alive connection: a GET that meets the
// closed connection is sent again on a new one; a DELETE, which may not be
// sent twice, is not sent on it at all.
func TestH1ClientStaleConnections(t *testing.T) {
	closed := make(chan struct{}, 8)
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// A keep-alive answer, then the server changes its mind.
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		c.Close()
		closed <- struct{}{}
	})
	c := testH1Client(5 * time.Second)
	defer c.CloseIdle()
	tg := up.addr
	for i, method := range []string{"GET", "GET", "DELETE", "DELETE", "GET"} {
		_, body, err := h1Get(t, c, tg, method, "/")
		if err != nil || body != "ok" {
			t.Fatalf("request %d (%s): %q %v", i, method, body, err)
		}
		<-closed
	}
}

// A connection reused right after its last response is not looked at for
// a request that may be sent twice, and a target that closed it meanwhile
// costs a retry, not a failure; a request that may not be sent twice, or
// a connection idle for longer, is looked at first.
func TestH1ClientReuseSoonAfter(t *testing.T) {
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
			if req.Method != "HEAD" {
				fmt.Fprint(c, "ok")
			}
			if req.URL.Path == "/then-close" {
				return
			}
		}
	})
	c := testH1Client(5 * time.Second)
	defer c.CloseIdle()
	c.lookAfter = time.Hour
	tg := up.addr
	for i, step := range []struct {
		method, path string
		looks        int64
	}{
		{"GET", "/", 0}, {"GET", "/", 0}, {"HEAD", "/", 0}, {"POST", "/", 1}, {"DELETE", "/", 2},
		{"GET", "/then-close", 2}, {"GET", "/", 2},
	} {
		_, body, err := h1Get(t, c, tg, step.method, step.path)
		if want := map[bool]string{true: "", false: "ok"}[step.method == "HEAD"]; err != nil || body != want {
			t.Fatalf("request %d (%s %s): %q %v", i, step.method, step.path, body, err)
		}
		if got := c.looks.Load(); got != step.looks {
			t.Errorf("request %d (%s %s): %d looks, want %d", i, step.method, step.path, got, step.looks)
		}
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the GET after the close retried on a new one)", n)
	}
	c.lookAfter = 0
	if _, _, err := h1Get(t, c, tg, "GET", "/"); err != nil {
		t.Fatal(err)
	}
	if got := c.looks.Load(); got != 3 {
		t.Errorf("%d looks after a GET on a connection idle past lookAfter, want 3", got)
	}
}

// A target whose connection fails on a fresh connection is not retried:
// it closes without an answer, keeps silent past the response header
// timeout, sends a header over the limit, or speaks something else.
func TestH1ClientFailures(t *testing.T) {
	steps := []struct {
		script string
		check  func(error) bool
	}{
		{"close", func(err error) bool { _, ok := err.(readFromServerError); return ok && errors.Is(err, io.EOF) }},
		{"hang", func(err error) bool {
			var ne net.Error
			return errors.As(err, &ne) && ne.Timeout() && strings.Contains(err.Error(), "awaiting response headers")
		}},
		{"huge", func(err error) bool {
			return strings.Contains(err.Error(), "server response headers exceeded 8192 bytes")
		}},
		{"garbage", func(err error) bool { return strings.Contains(err.Error(), "malformed HTTP") }},
	}
	up := newScriptedUpstream(t, func(n int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil || n > len(steps) {
			return
		}
		switch steps[n-1].script {
		case "hang":
			_, _ = io.Copy(io.Discard, c)
		case "huge":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Huge: %s\r\nContent-Length: 0\r\n\r\n", strings.Repeat("x", 20<<10))
		case "garbage":
			fmt.Fprint(c, "SMTP ready\r\n\r\n")
		}
	})
	c := testH1Client(200 * time.Millisecond)
	defer c.CloseIdle()
	tg := up.addr
	for n, step := range steps {
		_, _, err := h1Get(t, c, tg, "GET", "/")
		if err == nil || !step.check(err) {
			t.Errorf("%s: %v (%T)", step.script, err, err)
		}
		if got := up.conns.Load(); got != int32(n+1) {
			t.Errorf("%s: %d connections, want %d", step.script, got, n+1)
		}
	}
}

// A canceled request (its client went away) ends at once, with the
// context's error, and its connection is not kept.
func TestH1ClientCancel(t *testing.T) {
	release := make(chan struct{})
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		<-release
	})
	defer close(release)
	c := testH1Client(0)
	defer c.CloseIdle()
	tg := up.addr
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tg+"/", nil)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.RoundTrip(req, tg); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled request: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if n := len(c.idle[tg]); n != 0 {
		t.Errorf("%d idle connections after a canceled request", n)
	}
}

// A request whose client connection goes away (its watch's Gone) ends
// at once with its context's error, its connection is not kept, and the
// watch ends the next exchanges before they begin; a request whose
// client stays keeps its connection.
func TestH1ClientWatch(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{})
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/hold" {
				close(held)
				<-release
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	defer close(release)
	c := testH1Client(0)
	defer c.CloseIdle()
	tg := up.addr
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWatch(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tg+"/", nil)
	resp, err := c.RoundTripWith(req, tg, &Hooks{Watch: w})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	resp.Body.Close()
	if n := len(c.idle[tg]); n != 1 {
		t.Fatalf("%d idle connections after a whole response, want 1", n)
	}

	hold, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tg+"/hold", nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTripWith(hold, tg, &Hooks{Watch: w})
		done <- err
	}()
	// Gone once the exchange is under way: the upstream has the request.
	<-held
	w.Gone()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("request of a client gone: %v", err)
	}
	if n := len(c.idle[tg]); n != 0 {
		t.Errorf("%d idle connections after a client went away", n)
	}
	if _, err := c.RoundTripWith(req, tg, &Hooks{Watch: w}); !errors.Is(err, context.Canceled) {
		t.Errorf("request after the client went: %v", err)
	}
}

// Informational responses reach the request's httptrace hook, and the
// final one is returned.
func TestH1ClientInformational(t *testing.T) {
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	c := testH1Client(time.Second)
	defer c.CloseIdle()
	tg := up.addr
	var got []string
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			got = append(got, fmt.Sprint(code, " ", h.Get("Link")))
			return nil
		},
	})
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tg+"/", nil)
	resp, err := c.RoundTrip(req, tg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" || len(got) != 1 || got[0] != "103 </a.css>; rel=preload" {
		t.Errorf("%d %q, 1xx %q", resp.StatusCode, b, got)
	}
}

// Bytes a target sends on an idle connection are logged as the Transport
// logs them, and the connection is closed.
func TestH1ClientUnsolicitedBytes(t *testing.T) {
	poke := make(chan struct{})
	up := newScriptedUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Once the response has been read: on an idle connection.
		<-poke
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
		_, _ = io.Copy(io.Discard, c)
	})
	var logs testlog.Buffer
	log.SetOutput(&logs)
	defer log.SetOutput(io.Discard)
	c := testH1Client(time.Second)
	defer c.CloseIdle()
	tg := up.addr
	if _, body, err := h1Get(t, c, tg, "GET", "/"); err != nil || body != "ok" {
		t.Fatalf("%q %v", body, err)
	}
	close(poke)
	testwait.For(t, "the line about the unsolicited response", func() bool {
		return strings.Contains(logs.String(), `Unsolicited response received on idle HTTP channel starting with "HTTP/1.1 200 OK`)
	})
	c.mu.Lock()
	n := len(c.idle[tg])
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d idle connections, want the one with unsolicited bytes closed", n)
	}
}

// Whatever a target answers, the client returns an error or a response
// whose body ends with no more than the target sent, never panics, and
// keeps the connection only with nothing unread on it.
func FuzzH1Response(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 12345\r\nEtag: \"x\"\r\n\r\n", true)
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", true)
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 202 Accepted\r\nConnection: X-Back\r\nX-Back: hop\r\nKeep-Alive: timeout=3\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nX-B: 1\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n0\r\nX-Late: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 4\r\n\r\nbusy",
		"",
		"SSH-2.0-OpenSSH\r\n\r\n",
	} {
		f.Add(s, false)
	}
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 408 Request Timeout\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("y", 2000) + "\r\n\r\n",
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, response string, head bool) {
		client, server := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			defer server.Close()
			if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
				return
			}
			_, _ = io.WriteString(server, response)
		}()
		c := testH1Client(time.Second)
		c.maxHeader = 1 << 10
		defer func() {
			c.CloseIdle()
			client.Close()
			<-served
		}()
		pc := &pconn{conn: client, addr: "fuzz"}
		pc.br = bufio.NewReaderSize(pc, readBuffer)
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		informational := 0
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(int, textproto.MIMEHeader) error { informational++; return nil },
		})
		req, _ := http.NewRequestWithContext(ctx, method, "http://fuzz/", nil)
		wire, err := appendRequest(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.exchange(ctx, pc, req, wire, nil)
		if informational > len(response)/10 {
			t.Fatalf("%d informational responses from %d bytes", informational, len(response))
		}
		if err != nil {
			return
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, int64(len(response))+1))
		resp.Body.Close()
		if n > int64(len(response)) {
			t.Fatalf("a body of more than the %d bytes sent", len(response))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, pc := range c.idle["fuzz"] {
			if pc.br.Buffered() > 0 {
				t.Fatalf("a connection kept with %d bytes unread", pc.br.Buffered())
			}
		}
	})
}

// A response that comes on an idle connection, after the one asked for,
// is not taken for the answer to the next request, which comes once it
// has arrived: the connection is closed and the request goes on a new
// one. (Within lookAfter of the last response a request that may be sent
// twice goes without a look: TestH1ClientReuseSoonAfter; here every reuse
// is looked at, as after a longer idle time.)
func TestH1ClientLateResponse(t *testing.T) {
	poke, late := make(chan struct{}), make(chan struct{})
	up := newScriptedUpstream(t, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if n == 1 {
				<-poke
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nnot you")
				close(late)
			}
		}
	})
	var logs testlog.Buffer
	log.SetOutput(&logs)
	defer log.SetOutput(io.Discard)
	c := testH1Client(time.Second)
	c.lookAfter = 0
	defer c.CloseIdle()
	tg := up.addr
	for i, method := range []string{"GET", "GET"} {
		if _, body, err := h1Get(t, c, tg, method, "/"); err != nil || body != "ok" {
			t.Fatalf("%s: %q %v", method, body, err)
		}
		if i == 0 {
			close(poke)
			<-late
		}
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	if !strings.Contains(logs.String(), "Unsolicited response received on idle HTTP channel") {
		t.Errorf("the late response was not logged: %q", logs.String())
	}
}

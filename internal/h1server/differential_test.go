package h1server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// differentialHandlers do to a response writer what handlers do, each
// in its own way; TestResponseMatchesNetHTTP runs each through this
// server and through net/http's and compares the bytes the client gets.
var differentialHandlers = map[string]http.HandlerFunc{
	"nothing":    func(w http.ResponseWriter, r *http.Request) {},
	"short body": func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello, world\n") },
	"html body":  func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html><body>hi</body></html>")) },
	"typed body": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("x"))
	},
	"no sniffing": func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		w.Write([]byte("<html>"))
	},
	"encoded": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write([]byte("\x1f\x8b\x08"))
	},
	"declared length": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.Write([]byte("12345"))
	},
	"length short": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("12345"))
	},
	"length exceeded": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, err := w.Write([]byte("12345"))
		w.Write([]byte(fmt.Sprint(err)))
	},
	"invalid length": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "abc")
		w.Write([]byte("12345"))
	},
	"one big write": func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("a"), 5000)) },
	"small writes": func(w http.ResponseWriter, r *http.Request) {
		for i := range 300 {
			fmt.Fprintf(w, "line %d\n", i)
		}
	},
	"2048 exactly": func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("b"), 2048)) },
	"2049":         func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("b"), 2049)) },
	"flushed": func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		w.Write([]byte("second"))
	},
	"flush before writing": func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		w.Write([]byte("late"))
	},
	"controller flush": func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = http.NewResponseController(w).Flush()
	},
	"no content": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		w.WriteHeader(http.StatusNoContent)
		_, err := w.Write([]byte("abc"))
		w.Header().Set("X-Err", fmt.Sprint(err))
	},
	"not modified": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", "30")
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	},
	"early hints": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set("Content-Length", "9")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("ok"))
	},
	"declared trailer": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum, x-count,Content-Length")
		w.Write([]byte("body"))
		w.Header().Set("X-Sum", "abc")
		w.Header().Set("X-Count", "1")
		w.Header().Set("Content-Length", "9")
	},
	"prefixed trailer": func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("body"))
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
	},
	"closing": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Write([]byte("bye"))
	},
	"closing upper": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Close")
		w.Write([]byte("bye"))
	},
	"identity": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "identity")
		w.Write([]byte("raw"))
	},
	"chunked asked": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Write([]byte("raw"))
	},
	"length and encoding": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "gzip")
		w.Header().Set("Content-Length", "3")
		w.Write([]byte("raw"))
	},
	"changed after WriteHeader": func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Before", "1")
		w.WriteHeader(http.StatusCreated)
		h.Set("X-After", "2")
		w.Header().Set("X-After-Header", "3")
		w.Write([]byte("created"))
	},
	"own date": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", "Mon, 01 Jan 2024 00:00:00 GMT")
		w.Write([]byte("dated"))
	},
	"no date": func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		w.Write([]byte("undated"))
	},
	"odd status": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(599); w.Write([]byte("odd")) },
	"status 999": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(999) },
	"twice":      func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201); w.WriteHeader(202) },
	"newline in value": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Bad", "a\r\nInjected: yes")
		w.Write([]byte("x"))
	},
	"write string": func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("s", 3000))
	},
	"aborted": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write(bytes.Repeat([]byte("z"), 50))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	},
	"aborted after WriteHeader": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Started", "1")
		w.WriteHeader(http.StatusAccepted)
		panic(http.ErrAbortHandler)
	},
	"aborted after a short write": func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("part"))
		panic(http.ErrAbortHandler)
	},
	"hijacked": func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nraw"))
		c.Close()
	},
	"echo": func(w http.ResponseWriter, r *http.Request) {
		var keys []string
		for k, vv := range r.Header {
			keys = append(keys, k+"="+strings.Join(vv, "|"))
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "%s %q %q %q %q %s %d.%d %v %d %v\n%s\n", r.Method, r.Host, r.RequestURI, r.URL.Path, r.URL.RawQuery,
			r.Proto, r.ProtoMajor, r.ProtoMinor, r.Body == http.NoBody, r.ContentLength, r.Close, strings.Join(keys, "\n"))
	},
}

// testIdle ends the connections of the exchanges that wait for a body
// that does not come, on both servers alike.
const testIdle = 300 * time.Millisecond

var dateLine = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)

// TestResponseMatchesNetHTTP sends the same requests to this server and
// to net/http's, serving the same handler, and compares what comes back:
// a GET and a HEAD, each followed on the same connection by a request
// this server leaves to the fallback (net/http's own), which closes the
// connection.
func TestResponseMatchesNetHTTP(t *testing.T) {
	last := "GET /last HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"
	requests := []string{
		"GET /path/a%20b?q=1&r=%zz HTTP/1.1\r\nHost: example.test\r\nUser-Agent: t\r\nAccept: */*\r\nX-Multi: 1\r\nx-multi:  2 \r\nConnection: keep-alive\r\n\r\n",
		"HEAD /h HTTP/1.1\r\nHost: example.test:8443\r\n\r\n",
		"GET //double/slash HTTP/1.1\r\nHost: [::1]:80\r\nCookie: a=b\r\nCookie: c=d\r\n\r\n",
	}
	for name, h := range differentialHandlers {
		for _, req := range requests {
			t.Run(name+"/"+strings.Fields(req)[0], func(t *testing.T) {
				mux := http.NewServeMux()
				mux.Handle("/last", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "last\n") }))
				mux.Handle("/", h)
				// Each send is one write, then one with the rest: both
				// servers see the same reads.
				want := exchange(t, startNetHTTP(t, mux), req, last)
				got := exchange(t, startServer(t, mux), req, last)
				want = dateLine.ReplaceAllString(want, "Date: D\r")
				got = dateLine.ReplaceAllString(got, "Date: D\r")
				if got != want {
					t.Errorf("responses differ\nnet/http:\n%q\nthis server:\n%q", want, got)
				}
			})
		}
	}
}

// TestPipelinedRequestsMatchNetHTTP sends requests in one write.
func TestPipelinedRequestsMatchNetHTTP(t *testing.T) {
	h := differentialHandlers["echo"]
	reqs := "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	want := exchange(t, startNetHTTP(t, h), reqs)
	got := exchange(t, startServer(t, h), reqs)
	want = dateLine.ReplaceAllString(want, "Date: D\r")
	got = dateLine.ReplaceAllString(got, "Date: D\r")
	if got != want {
		t.Errorf("responses differ\nnet/http:\n%q\nthis server:\n%q", want, got)
	}
	if strings.Count(got, "HTTP/1.1 200 OK") != 3 {
		t.Errorf("want three responses, got %q", got)
	}
}

// exchange writes each of sends in turn on a new connection to addr,
// reading what came after each, and returns all it read until the server
// closed the connection.
func exchange(t *testing.T, addr string, sends ...string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &raw))
	for i, s := range sends {
		if _, err := io.WriteString(c, s); err != nil {
			break
		}
		if i < len(sends)-1 {
			// This request's response is read before the next goes.
			resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(s)[0]})
			if err != nil {
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	_, _ = io.Copy(io.Discard, br)
	return raw.String()
}

func startNetHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), IdleTimeout: testIdle}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// startServer serves h with this server, and with net/http's server for
// the connections it hands over.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := newChanListener(ln.Addr())
	fullSrv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), IdleTimeout: testIdle}
	go fullSrv.Serve(full)
	srv := &Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: testIdle,
		Fallback: func(c net.Conn, unread []byte) bool { return full.push(&replayConn{Conn: c, unread: unread}) }}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); ln.Close(); fullSrv.Close() })
	return ln.Addr().String()
}

type replayConn struct {
	net.Conn
	unread []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.unread) > 0 {
		n := copy(b, c.unread)
		c.unread = c.unread[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

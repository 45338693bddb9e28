package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The upstream of the differential test (differential_test.go): raw TCP,
// so that it sees the bytes of each request and which connection it came
// on, answering by the request's path.

// wireRequest is a request as it reached the upstream.
type wireRequest struct {
	conn    int    // the connection it came on, numbered by first request
	head    string // request line and header fields, as they came
	framing string // "none", "length N" or "chunked"
	body    string
	trailer string
}

// recorder is the upstream: it answers each request by its path (see
// respond) and records what came.
type recorder struct {
	t    *testing.T
	ln   net.Listener
	poke chan struct{}
	// arrived gets a value for each request recorded.
	arrived chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	accepted int
	seen     []wireRequest
	// closed counts the connections the client closed, by number (0:
	// before any request).
	closed map[int]int
	// byes are the connections the upstream closed its side of.
	byes   map[int]bool
	nextID int
}

func newRecorder(t *testing.T) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &recorder{t: t, ln: ln, poke: make(chan struct{}), arrived: make(chan struct{}, 64),
		done: make(chan struct{}), closed: map[int]int{}, byes: map[int]bool{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.accepted++
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				u.serve(c)
			}()
		}
	}()
	return u
}

func (u *recorder) close() {
	close(u.done)
	u.ln.Close()
	u.wg.Wait()
}

// closedBy reports whether the client closed connection id.
func (u *recorder) closedBy(id int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closed[id] > 0
}

func (u *recorder) serve(c net.Conn) {
	// A connection the gateway closes while the upstream waits is
	// closed under this goroutine by the end of the test.
	stop := context.AfterFunc(doneContext(u.done), func() { c.Close() })
	defer stop()
	br := bufio.NewReader(c)
	id := 0
	for nth := 1; ; nth++ {
		head, err := readHead(br)
		if err != nil {
			if err == io.EOF || head == "" {
				u.mu.Lock()
				u.closed[id]++
				u.mu.Unlock()
			}
			return
		}
		if id == 0 {
			u.mu.Lock()
			u.nextID++
			id = u.nextID
			u.mu.Unlock()
		}
		r := wireRequest{conn: id, head: head}
		line, fields, _ := strings.Cut(head, "\r\n")
		parts := strings.Fields(line)
		method, target := parts[0], parts[1]
		path, _, _ := strings.Cut(target, "?")
		hdr, _ := textproto.NewReader(bufio.NewReader(strings.NewReader(fields + "\r\n"))).ReadMIMEHeader()
		if path == "/continue" && strings.EqualFold(hdr.Get("Expect"), "100-continue") && hdr.Get("Content-Length") != "" {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		r.framing, r.body, r.trailer, err = readBody(br, hdr)
		u.mu.Lock()
		u.seen = append(u.seen, r)
		u.mu.Unlock()
		select {
		case u.arrived <- struct{}{}:
		default:
		}
		if path == "/bye" {
			// A keep-alive answer, then the server closes the idle
			// connection; what still comes is dropped.
			if !u.respond(c, br, method, "/ok", nth, r.body) {
				return
			}
			c.(*net.TCPConn).CloseWrite()
			u.mu.Lock()
			u.byes[id] = true
			u.mu.Unlock()
			_, _ = io.Copy(io.Discard, br)
			u.mu.Lock()
			u.closed[id]++
			u.mu.Unlock()
			return
		}
		if err != nil || !u.respond(c, br, method, path, nth, r.body) {
			return
		}
	}
}

func doneContext(done chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	return ctx
}

// respond answers a request by its path; false ends the connection.
func (u *recorder) respond(c net.Conn, br *bufio.Reader, method, path string, nth int, body string) bool {
	ok := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\n"
	if method != "HEAD" {
		ok += "ok"
	}
	write := func(s string) bool { _, err := io.WriteString(c, s); return err == nil }
	waitPoke := func() bool {
		select {
		case <-u.poke:
			return true
		case <-u.done:
			return false
		}
	}
	switch path {
	case "/ok":
		return write(ok)
	case "/echo":
		return write(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	case "/continue":
		if body == "" {
			// Without a body the 100 comes in front of the final answer.
			ok = "HTTP/1.1 100 Continue\r\n\r\n" + ok
		}
		return write(ok)
	case "/hints":
		return write("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </c.css>; rel=preload\r\n\r\n" + ok)
	case "/chunked":
		return write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Sum: 5\r\nX-Late: 1\r\n\r\n")
	case "/head-length":
		return write("HTTP/1.1 200 OK\r\nContent-Length: 12345\r\nEtag: \"e\"\r\n\r\n")
	case "/empty":
		return write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	case "/204":
		return write("HTTP/1.1 204 No Content\r\nX-B: 1\r\n\r\n")
	case "/304":
		return write("HTTP/1.1 304 Not Modified\r\nEtag: \"e\"\r\n\r\n")
	case "/until-close":
		write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
		return false
	case "/close":
		write(strings.Replace(ok, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
		return false
	case "/close-open":
		// Says close, keeps the connection: the client closes it.
		return write(strings.Replace(ok, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
	case "/http10":
		return write("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
	case "/hangup":
		// Closes a kept-alive connection instead of answering.
		return nth == 1 && write(ok)
	case "/hangup-always":
		return false
	case "/garbage-after":
		return write(ok + "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nnot you")
	case "/junk-after":
		return write(ok + "\x00\x01junk")
	case "/unsolicited", "/unsolicited-long":
		if !write(ok) || !waitPoke() {
			return false
		}
		extra := ""
		if path == "/unsolicited-long" {
			extra = "X-Padding: " + strings.Repeat("p", 100) + "\r\n"
		}
		return write("HTTP/1.1 204 No Content\r\n" + extra + "\r\n")
	case "/408":
		if !write(ok) || !waitPoke() {
			return false
		}
		// A server's goodbye to an idle connection; it then waits for
		// the client to close.
		write("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n")
		c.(*net.TCPConn).CloseWrite()
		return true
	case "/short":
		write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
		return false
	case "/huge":
		write("HTTP/1.1 200 OK\r\nX-Huge: " + strings.Repeat("x", 2*diffMaxHeader) + "\r\nContent-Length: 0\r\n\r\n")
		return false
	case "/garbage":
		write("SSH-2.0-OpenSSH\r\n\r\n")
		return false
	case "/hang":
		// Until the client gives up and closes.
		_, _ = io.Copy(io.Discard, br)
		return false
	case "/switch":
		write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		return false
	}
	u.t.Errorf("no answer for %s", path)
	return false
}

// readHead reads a request line and header fields, up to the empty line.
func readHead(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\r\n" {
			return b.String(), nil
		}
		if b.Len() > 64<<10 {
			return b.String(), errors.New("request header too long")
		}
	}
}

// readBody reads a request body as its header frames it.
func readBody(br *bufio.Reader, h textproto.MIMEHeader) (framing, body, trailer string, err error) {
	if te := h.Get("Transfer-Encoding"); te != "" {
		if te != "chunked" {
			return "te " + te, "", "", errors.New("unknown transfer coding")
		}
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return "chunked", b.String(), "", err
			}
			size, _, _ := strings.Cut(strings.TrimSpace(line), ";")
			n, err := strconv.ParseInt(size, 16, 32)
			if err != nil || n > 1<<20 {
				return "chunked", b.String(), "", fmt.Errorf("chunk size %q", line)
			}
			if n == 0 {
				break
			}
			chunk := make([]byte, n+2)
			if _, err := io.ReadFull(br, chunk); err != nil {
				return "chunked", b.String(), "", err
			}
			b.Write(chunk[:n])
		}
		t, err := readHead(br)
		return "chunked", b.String(), t, err
	}
	cl := h.Get("Content-Length")
	if cl == "" {
		return "none", "", "", nil
	}
	n, err := strconv.ParseInt(cl, 10, 32)
	if err != nil || n > 1<<20 {
		return "length " + cl, "", "", errors.New("bad length")
	}
	buf := make([]byte, n)
	_, err = io.ReadFull(br, buf)
	return "length " + cl, string(buf), "", err
}

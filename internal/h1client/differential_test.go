package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
)

// The differential test sends the same requests, one after the other,
// through the Client (with a Transport for the requests it does not
// take, as proxy dispatches them) and through net/http's Transport alone,
// each time to a fresh loopback upstream that records what arrives on the
// wire, and compares what the upstream saw (the request line and header
// fields byte for byte, the framing and bytes of the body, which
// connection each request came on, how many connections were made) and
// what the caller saw (status, header, length, body, trailer, the
// informational responses, the error) and what was logged.
//
// Where the Client answers otherwise on purpose, the scenario names the
// exception below; an exception named and not met fails the scenario as
// a difference not named does.

// exception is a deliberate difference from the Transport.
type exception string

const (
	// errorSaysWhere: a failure to read the first byte of a response
	// that is not retried comes back as "net/http: Transport failed to
	// read from server: <err>", which unwraps to err; the Transport
	// returns the bare err (often just "EOF"), which tells an operator
	// reading the gateway's log nothing of where it failed. The wrapped
	// error is compared.
	errorSaysWhere exception = "errorSaysWhere"
	// separatePools: the requests the Client does not take go through
	// the Transport, whose connections are its own, so a sequence that
	// mixes both kinds uses one connection for each where the Transport
	// alone uses one for all. Each kind keeps its connections as the
	// Transport alone does (compared on the connections of each kind).
	separatePools exception = "separatePools"
	// plainHeaderErrors: a response header that cannot be read
	// (malformed, over the size limit) fails the request with
	// the parser's error; the Transport puts "net/http: HTTP/1.x
	// transport connection broken: " in front of it, as its read
	// goroutine closes the connection, although nothing was broken.
	plainHeaderErrors exception = "plainHeaderErrors"
	// noTunnel: a 101 to a request that did not ask for a protocol
	// change (those go through the Transport) is returned with an empty
	// body that cannot be written to, and the connection is closed; the
	// Transport returns the connection itself as a writable body.
	noTunnel exception = "noTunnel"
	// logFirstBytes: bytes found on an idle connection by a look at it
	// (not by a read) are logged up to their first 64, as a bounded
	// peek finds them; the Transport logs what its read buffer holds.
	logFirstBytes exception = "logFirstBytes"
)

// How a step's request carries a body (none: a nil Body).
const (
	knownBody   = "known"   // requestBody with its length
	unknownBody = "unknown" // the same, its length not given
	emptyReader = "empty"   // a Body that ends at once, length not given
	noBodyValue = "NoBody"  // http.NoBody
)

type step struct {
	method, path string
	header       map[string]string
	body         string
	// taken is whether the Client takes the request (else the
	// Transport carries it on the gateway's side).
	taken bool
	// poke lets the upstream send what it holds back after the response
	// (an unsolicited response, a 408); then, like settle, the step
	// waits for the client to close the connection.
	poke bool
	// settle waits, after the response and on the Transport's side
	// only, until it has closed the connection the request came on: its
	// read goroutine finds bytes that followed a response at a time of
	// its own, and the next request must not race with that. The Client
	// finds them as the response ends and closes the connection before
	// the body's last Read returns, so its next request goes at once.
	settle bool
	// bye waits, after the response, until the upstream has closed the
	// connection, as a server does with one idle too long (a FIN: the
	// upstream reads on and drops what comes), and on the Transport's
	// side until it has closed its end too.
	bye bool
	// cancel cancels the request once it has reached the upstream.
	cancel bool
}

type scenario struct {
	name       string
	steps      []step
	exceptions []exception
}

func get(path string) step  { return step{method: "GET", path: path, taken: true} }
func head(path string) step { return step{method: "HEAD", path: path, taken: true} }
func post(path string) step { return step{method: "POST", path: path, taken: true} }
func del(path string) step  { return step{method: "DELETE", path: path, taken: true} }
func settled(s step) step   { s.settle = true; return s }
func poked(s step) step     { s.poke = true; return s }
func bye(s step) step       { s.bye = true; return s }
func withBody(s step, kind string) step {
	s.body = kind
	s.taken = kind == noBodyValue
	return s
}
func withHeader(s step, name, value string) step {
	h := map[string]string{name: value}
	for k, v := range s.header {
		h[k] = v
	}
	s.header = h
	return s
}

var scenarios = []scenario{
	{name: "methods without a body on one connection", steps: []step{
		get("/ok"), head("/ok"), post("/ok"), {method: "PUT", path: "/ok", taken: true}, del("/ok"),
		{method: "OPTIONS", path: "/ok", taken: true}, {method: "PATCH", path: "/ok", taken: true},
		withHeader(withHeader(get("/ok?a=1&b=%41"), "Cookie", "a=1"), "X-Custom", " padded "),
		withHeader(get("/ok"), "User-Agent", "curl/8"),
	}},
	{name: "empty bodies", steps: []step{
		withBody(post("/echo"), noBodyValue), withBody(post("/echo"), emptyReader),
		withBody(get("/echo"), emptyReader), withBody(del("/echo"), noBodyValue),
	}, exceptions: []exception{separatePools}},
	{name: "bodies of known and unknown length", steps: []step{
		withBody(post("/echo"), knownBody), withBody(post("/echo"), unknownBody),
		withBody(step{method: "PUT", path: "/echo"}, knownBody), withBody(step{method: "PUT", path: "/echo"}, unknownBody),
	}},
	{name: "100-continue", steps: []step{
		withHeader(withBody(post("/continue"), knownBody), "Expect", "100-continue"),
		withHeader(get("/continue"), "Expect", "100-continue"),
		get("/continue"),
	}, exceptions: []exception{separatePools}},
	{name: "early hints", steps: []step{get("/hints"), head("/hints"), get("/hints")}},
	{name: "response framing", steps: []step{
		get("/chunked"), head("/head-length"), get("/empty"), get("/204"), get("/304"), get("/chunked"),
		get("/until-close"), get("/ok"),
	}},
	{name: "connection close", steps: []step{
		get("/ok"), get("/close"), get("/ok"), get("/close-open"), get("/ok"), get("/http10"), get("/ok"),
		head("/close"), get("/ok"),
	}},
	{name: "idempotent request on a connection closed before responding", steps: []step{
		get("/ok"), get("/hangup"), get("/ok"), head("/hangup"), get("/ok"),
		{method: "OPTIONS", path: "/hangup", taken: true},
	}},
	{name: "request that may not be sent twice on a connection closed before responding", steps: []step{
		get("/ok"), post("/hangup"), get("/ok"), del("/hangup"), get("/ok"),
		{method: "PUT", path: "/hangup", taken: true},
	}, exceptions: []exception{errorSaysWhere}},
	{name: "idempotency key on a connection closed before responding", steps: []step{
		get("/ok"), withHeader(post("/hangup"), "Idempotency-Key", "k1"),
		get("/ok"), withHeader(del("/hangup"), "X-Idempotency-Key", "k2"),
	}},
	{name: "fresh connection closed before responding", steps: []step{
		get("/hangup-always"), post("/hangup-always"), get("/ok"),
	}, exceptions: []exception{errorSaysWhere}},
	{name: "pipelined bytes after a response", steps: []step{
		settled(get("/garbage-after")), get("/ok"), settled(get("/junk-after")), get("/ok"),
	}},
	{name: "unsolicited response on an idle connection", steps: []step{
		poked(get("/unsolicited")), get("/ok"), poked(get("/408")), get("/ok"),
	}},
	{name: "long unsolicited response on an idle connection", steps: []step{
		poked(get("/unsolicited-long")), get("/ok"),
	}, exceptions: []exception{logFirstBytes}},
	{name: "idle connection the upstream closed", steps: []step{
		bye(get("/bye")), post("/ok"), bye(get("/bye")), get("/ok"), bye(get("/bye")), del("/ok"),
		bye(head("/bye")), withHeader(post("/ok"), "Idempotency-Key", "k3"),
	}},
	{name: "failures", steps: []step{
		get("/short"), get("/huge"), get("/garbage"), get("/hang"), get("/ok"),
	}, exceptions: []exception{plainHeaderErrors}},
	{name: "canceled", steps: []step{
		get("/ok"), {method: "GET", path: "/hang", taken: true, cancel: true}, get("/ok"),
	}},
	{name: "switching protocols unasked", steps: []step{get("/switch"), get("/ok")},
		exceptions: []exception{noTunnel}},
}

const (
	diffHeaderTimeout = 300 * time.Millisecond
	diffMaxHeader     = 8 << 10
	requestBody       = "hello, upstream"
)

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

// seen is what the caller saw of one request.
type seen struct {
	status        string
	proto         string
	header        http.Header
	contentLength int64
	close         bool
	encoding      []string
	body          string
	bodyErr       string
	trailer       http.Header
	writable      bool
	informational []string
	err           string
}

// run is what one side of a scenario saw.
type run struct {
	seen     []seen
	wire     []wireRequest
	accepted int
	logs     []string
	// viaTransport marks the requests the gateway's side sent through
	// the Transport.
	viaTransport []bool
	met          map[exception]bool
}

// side sends requests as the gateway does, or as the Transport alone.
type side struct {
	name      string
	gateway   bool
	client    *Client
	transport *http.Transport
}

func newSide(gateway bool) *side {
	s := &side{gateway: gateway, name: "transport"}
	s.transport = &http.Transport{
		ResponseHeaderTimeout:  diffHeaderTimeout,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConnsPerHost:    256,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: diffMaxHeader,
	}
	if gateway {
		s.name = "h1client"
		s.client = New(Options{
			Dial:                   (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ResponseHeaderTimeout:  diffHeaderTimeout,
			MaxResponseHeaderBytes: diffMaxHeader,
		})
	}
	return s
}

func (s *side) closeIdle() {
	s.transport.CloseIdleConnections()
	if s.client != nil {
		s.client.CloseIdle()
	}
}

func (s *side) run(t *testing.T, sc scenario) run {
	u := newRecorder(t)
	defer u.close()
	defer s.closeIdle()
	var out testlog.Buffer
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(&out)
	log.SetFlags(0)
	defer func() {
		log.SetOutput(prev)
		log.SetFlags(flags)
	}()

	r := run{met: map[exception]bool{}}
	for i, st := range sc.steps {
		var body io.Reader
		switch st.body {
		case knownBody:
			body = strings.NewReader(requestBody)
		case unknownBody:
			body = io.MultiReader(strings.NewReader(requestBody))
		case emptyReader:
			body = io.MultiReader()
		case noBodyValue:
			body = http.NoBody
		}
		var informational []string
		ctx, cancel := context.WithCancel(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				informational = append(informational, fmt.Sprint(code, " ", h))
				return nil
			},
		}))
		req, err := http.NewRequestWithContext(ctx, st.method, "http://"+u.ln.Addr().String()+st.path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "app.example:8080"
		for k, v := range st.header {
			req.Header.Set(k, v)
		}
		if st.cancel {
			for len(u.arrived) > 0 {
				<-u.arrived
			}
			go func() {
				select {
				case <-u.arrived:
					cancel()
				case <-u.done:
				}
			}()
		}
		var resp *http.Response
		viaTransport := true
		if s.gateway {
			if got := s.client.Takes(req); got != st.taken {
				t.Errorf("step %d (%s %s): Takes %v, want %v", i, st.method, st.path, got, st.taken)
			}
			if st.taken {
				viaTransport = false
				resp, err = s.client.RoundTrip(req, u.ln.Addr().String())
			}
		}
		if viaTransport {
			resp, err = s.transport.RoundTrip(req)
		}
		r.viaTransport = append(r.viaTransport, viaTransport)
		var sn seen
		if err != nil {
			sn.err = err.Error()
		} else {
			b, berr := io.ReadAll(resp.Body)
			resp.Body.Close()
			_, sn.writable = resp.Body.(io.Writer)
			sn.status, sn.proto, sn.header = resp.Status, resp.Proto, resp.Header
			sn.contentLength, sn.close, sn.encoding = resp.ContentLength, resp.Close, resp.TransferEncoding
			sn.body, sn.trailer = string(b), resp.Trailer
			if berr != nil {
				sn.bodyErr = berr.Error()
			}
		}
		sn.informational = informational
		r.seen = append(r.seen, sn)
		cancel()

		if st.poke {
			select {
			case u.poke <- struct{}{}:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: step %d: the upstream never waited to be poked", s.name, i)
			}
		}
		u.mu.Lock()
		id := u.seen[len(u.seen)-1].conn
		u.mu.Unlock()
		if st.bye {
			testwait.For(t, fmt.Sprintf("%s: step %d: the upstream closing connection %d", s.name, i, id), func() bool {
				u.mu.Lock()
				defer u.mu.Unlock()
				return u.byes[id]
			})
		}
		if st.poke || (st.settle || st.bye) && !s.gateway {
			testwait.For(t, fmt.Sprintf("%s: step %d: the client closing connection %d", s.name, i, id), func() bool {
				return u.closedBy(id)
			})
		}
	}
	s.closeIdle()
	u.mu.Lock()
	r.wire = slices.Clone(u.seen)
	r.accepted = u.accepted
	u.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line != "" {
			r.logs = append(r.logs, line)
		}
	}
	return r
}

var unsolicitedLine = regexp.MustCompile(`^(Unsolicited response received on idle HTTP channel starting with )(".*")(; err=.*)$`)

func TestDifferentialTransport(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			want := newSide(false).run(t, sc)
			got := newSide(true).run(t, sc)
			declared := map[exception]bool{}
			for _, e := range sc.exceptions {
				declared[e] = true
			}
			compareRuns(t, sc, got, want, declared)
			for e := range declared {
				if !got.met[e] {
					t.Errorf("exception %s declared, not met", e)
				}
			}
			for e := range got.met {
				if !declared[e] {
					t.Errorf("a difference that is exception %s, not declared", e)
				}
			}
		})
	}
}

func compareRuns(t *testing.T, sc scenario, got, want run, declared map[exception]bool) {
	t.Helper()
	// What the caller saw.
	for i, st := range sc.steps {
		g, w := got.seen[i], want.seen[i]
		if declared[noTunnel] && strings.HasPrefix(g.status, "101") && w.writable && !g.writable && !got.viaTransport[i] {
			got.met[noTunnel] = true
			g.writable = true
		}
		if declared[errorSaysWhere] && g.err == (readFromServerError{errors.New(w.err)}).Error() {
			got.met[errorSaysWhere] = true
			g.err = w.err
		}
		if declared[plainHeaderErrors] && w.err == "net/http: HTTP/1.x transport connection broken: "+g.err {
			got.met[plainHeaderErrors] = true
			g.err = w.err
		}
		if d := diffSeen(g, w); d != "" {
			t.Errorf("step %d (%s %s), the caller: %s", i, st.method, st.path, d)
		}
	}

	// What the upstream saw: the same requests, over connections made
	// for them alone, reused alike.
	if len(got.wire) != len(want.wire) {
		t.Errorf("the upstream got %d requests, want %d:\n got %s\nwant %s", len(got.wire), len(want.wire), heads(got.wire), heads(want.wire))
		return
	}
	for i := range got.wire {
		g, w := got.wire[i], want.wire[i]
		if g.head != w.head || g.framing != w.framing || g.body != w.body || g.trailer != w.trailer {
			t.Errorf("request %d on the wire:\n got %q %s %q %q\nwant %q %s %q %q", i, g.head, g.framing, g.body, g.trailer, w.head, w.framing, w.body, w.trailer)
		}
	}
	for _, r := range []run{got, want} {
		if d := distinct(r.wire); r.accepted != d {
			t.Errorf("%d connections accepted for %d that carried requests", r.accepted, d)
		}
	}
	if !declared[separatePools] {
		if gc, wc := connPattern(got.wire, nil), connPattern(want.wire, nil); !slices.Equal(gc, wc) {
			t.Errorf("connections of the requests %v, want %v", gc, wc)
		}
	} else {
		// Each kind alone is carried as the Transport carries it; the
		// steps and the requests on the wire go one for one here (no
		// request is sent twice in these scenarios).
		if len(got.wire) != len(sc.steps) {
			t.Fatalf("%d requests on the wire for %d steps", len(got.wire), len(sc.steps))
		}
		for _, via := range []bool{false, true} {
			keep := func(i int) bool { return got.viaTransport[i] == via }
			if gc, wc := connPattern(got.wire, keep), connPattern(want.wire, keep); !slices.Equal(gc, wc) {
				t.Errorf("connections of the requests through the %s %v, want %v", map[bool]string{false: "Client", true: "Transport"}[via], gc, wc)
			}
		}
		got.met[separatePools] = got.accepted > want.accepted
	}

	// What was logged.
	gl, wl := got.logs, slices.Clone(want.logs)
	if declared[logFirstBytes] {
		for i, line := range wl {
			m := unsolicitedLine.FindStringSubmatch(line)
			if b, err := strconv.Unquote(m[2]); m != nil && err == nil && len(b) > 64 {
				wl[i] = m[1] + strconv.Quote(b[:64]) + m[3]
				got.met[logFirstBytes] = slices.Contains(gl, wl[i])
			}
		}
	}
	if !slices.Equal(gl, wl) {
		t.Errorf("logged:\n got %q\nwant %q", gl, wl)
	}
}

func heads(ws []wireRequest) string {
	var b strings.Builder
	for _, w := range ws {
		line, _, _ := strings.Cut(w.head, "\r\n")
		fmt.Fprintf(&b, "[%d %s] ", w.conn, line)
	}
	return b.String()
}

// connPattern numbers the connection of each request kept (all when keep
// is nil) by first use among them.
func connPattern(ws []wireRequest, keep func(int) bool) []int {
	var out []int
	ids := map[int]int{}
	for i, w := range ws {
		if keep != nil && !keep(i) {
			continue
		}
		if ids[w.conn] == 0 {
			ids[w.conn] = len(ids) + 1
		}
		out = append(out, ids[w.conn])
	}
	return out
}

func distinct(ws []wireRequest) int {
	ids := map[int]bool{}
	for _, w := range ws {
		ids[w.conn] = true
	}
	return len(ids)
}

func diffSeen(g, w seen) string {
	var d []string
	add := func(what string, gv, wv any) {
		d = append(d, fmt.Sprintf("%s %v, want %v", what, gv, wv))
	}
	if g.err != w.err {
		add("error", g.err, w.err)
	}
	if g.status != w.status || g.proto != w.proto {
		add("status", g.proto+" "+g.status, w.proto+" "+w.status)
	}
	if fmt.Sprint(g.header) != fmt.Sprint(w.header) {
		add("header", g.header, w.header)
	}
	if g.contentLength != w.contentLength || g.close != w.close || fmt.Sprint(g.encoding) != fmt.Sprint(w.encoding) {
		add("length, close, coding", fmt.Sprint(g.contentLength, g.close, g.encoding), fmt.Sprint(w.contentLength, w.close, w.encoding))
	}
	if g.body != w.body || g.bodyErr != w.bodyErr {
		add("body", fmt.Sprintf("%q (%s)", g.body, g.bodyErr), fmt.Sprintf("%q (%s)", w.body, w.bodyErr))
	}
	if fmt.Sprint(g.trailer) != fmt.Sprint(w.trailer) {
		add("trailer", g.trailer, w.trailer)
	}
	if g.writable != w.writable {
		add("writable body", g.writable, w.writable)
	}
	if fmt.Sprint(g.informational) != fmt.Sprint(w.informational) {
		add("informational", g.informational, w.informational)
	}
	return strings.Join(d, "; ")
}

package h1client

import (
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

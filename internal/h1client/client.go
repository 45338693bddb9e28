package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Client is an HTTP/1.1 client for requests without a body. Its zero
// value is not usable: make one with New.
type Client struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// responseHeader bounds the wait for a response header (0: none).
	responseHeader time.Duration
	maxHeader      int64
	// lookAfter is the constant lookAfter (tests change it); looks
	// counts the looks at idle connections before their reuse.
	lookAfter time.Duration
	looks     atomic.Int64

	mu sync.Mutex
	// idle are the idle connections by target address, the most recently
	// used last.
	idle     map[string][]*pconn
	sweeping bool
}

const (
	// maxIdle and idleTimeout are the MaxIdleConnsPerHost and
	// IdleConnTimeout of the Transport that carries the other requests.
	maxIdle     = 256
	idleTimeout = 90 * time.Second
	// sweepEvery is how often idle connections are looked at.
	sweepEvery = time.Second
	// readBuffer is the size of a connection's read buffer, as the
	// Transport's.
	readBuffer = 4 << 10
	// lookAfter is how long a connection may have been idle and still
	// be reused without a look (see Client.conn).
	lookAfter = time.Millisecond
)

// Options are what a Client takes from its user.
type Options struct {
	// Dial makes a new connection to a target ("tcp" and its address).
	// Connections that are not a syscall.Conn cannot be looked at while
	// idle: they are taken as alive (see the package comment).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResponseHeaderTimeout bounds the wait for a response header once
	// the request is written (0: no bound), as the Transport's field of
	// that name.
	ResponseHeaderTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response header, each
	// informational one counted on its own, as the Transport's field of
	// that name; it must be more than 0.
	MaxResponseHeaderBytes int64
}

// New returns a Client with no connections yet.
func New(o Options) *Client {
	return &Client{
		dial:           o.Dial,
		responseHeader: o.ResponseHeaderTimeout,
		maxHeader:      o.MaxResponseHeaderBytes,
		lookAfter:      lookAfter,
		idle:           map[string][]*pconn{},
	}
}

// Takes reports whether req is one for the client: no body, no trailer,
// and nothing about the connection (no upgrade, no close), not CONNECT.
// RoundTrip must be given no other.
func (c *Client) Takes(req *http.Request) bool {
	return (req.Body == nil || req.Body == http.NoBody) && req.ContentLength == 0 && len(req.TransferEncoding) == 0 &&
		!req.Close && len(req.Trailer) == 0 && len(req.Header["Connection"]) == 0 && req.Method != http.MethodConnect
}

// pconn is a connection to a target.
type pconn struct {
	conn   net.Conn
	br     *bufio.Reader
	addr   string
	reused bool
	idleAt time.Time
	// limit is how much more the response header may take.
	limit int64
	// sawEOF is set once the target closed its side.
	sawEOF bool
}

// errHeaderLimit ends the read of a response header over the limit.
var errHeaderLimit = errors.New("response header limit reached")

// Read feeds br, counting the response header's bytes against its limit.
func (pc *pconn) Read(p []byte) (int, error) {
	if pc.limit <= 0 {
		return 0, errHeaderLimit
	}
	if int64(len(p)) > pc.limit {
		p = p[:pc.limit]
	}
	n, err := pc.conn.Read(p)
	pc.limit -= int64(n)
	if err == io.EOF {
		pc.sawEOF = true
	}
	return n, err
}

func (pc *pconn) close() { pc.conn.Close() }

// requestBuffers hold requests as they are written.
var requestBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// RoundTrip sends req, one that Takes, to the target at addr (host:port)
// and returns its response once the header is in; the body is read from
// the connection as the caller reads it, and the caller must read it to
// its end or close it. The request's URL gives the request target, its
// Host field (or the URL's host) the Host header; addr alone says where
// the request goes.
func (c *Client) RoundTrip(req *http.Request, addr string) (*http.Response, error) {
	return c.RoundTripWith(req, addr, nil)
}

// Hooks are what a caller of RoundTripWith hands over besides the
// request, in place of what the request's context would carry.
type Hooks struct {
	// Watch, when set, is the client connection the request came on:
	// its going away ends the exchange, as a canceled context does.
	Watch *Watch
	// Got1xx takes the informational responses, in place of the
	// request's httptrace Got1xxResponse hook.
	Got1xx func(code int, header textproto.MIMEHeader) error
}

// RoundTripWith is RoundTrip with hooks (nil: none).
func (c *Client) RoundTripWith(req *http.Request, addr string, h *Hooks) (*http.Response, error) {
	bp := requestBuffers.Get().(*[]byte)
	wire, err := appendRequest((*bp)[:0], req)
	defer func() {
		if cap(wire) <= 64<<10 {
			*bp = wire[:0]
			requestBuffers.Put(bp)
		}
	}()
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pc, err := c.conn(ctx, req, addr)
		if err != nil {
			return nil, err
		}
		resp, err := c.exchange(ctx, pc, req, wire, h)
		if err == nil {
			return resp, nil
		}
		if !pc.reused || !retryOnNewConn(req, err) {
			return nil, err
		}
	}
}

// conn returns an idle connection to addr, or a new one, for req.
func (c *Client) conn(ctx context.Context, req *http.Request, addr string) (*pconn, error) {
	for {
		pc, idle := c.takeIdle(addr)
		if pc == nil {
			break
		}
		// Looked at before use: bytes the target sent while the
		// connection was idle would be read as this request's response
		// (another request's, or none at all, handed to this client),
		// and a request that may not be sent twice must not meet a
		// connection the target has closed meanwhile, since it could
		// not be retried. The Transport's read goroutine sees both while
		// the connection is idle, as soon as it is scheduled.
		//
		// A connection whose last response ended less than lookAfter
		// ago is not looked at for a request that may be sent twice:
		// that response's bytes were read whole and nothing followed
		// them in that read (release), a target that closed the
		// connection meanwhile costs a retry on another one
		// (retryOnNewConn), and a target that sends something unasked
		// within that moment is one the Transport would not have caught
		// either, its read goroutine not having run yet. Under load most
		// reuses come that soon, and the look is a system call.
		if idle >= c.lookAfter || !replayable(req) {
			c.looks.Add(1)
			if lookIdle(pc) != idleAlive {
				pc.close()
				continue
			}
		}
		return pc, nil
	}
	conn, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &pconn{conn: conn, addr: addr}
	pc.br = bufio.NewReaderSize(pc, readBuffer)
	return pc, nil
}

// exchange writes the request on pc and reads the response header; the
// body is read from the response. pc is closed on failure.
func (c *Client) exchange(ctx context.Context, pc *pconn, req *http.Request, wire []byte, h *Hooks) (*http.Response, error) {
	// A client that goes away ends the exchange (the request's context
	// is canceled, or the watch of its connection sees it go): its
	// connection is closed under it.
	var stop stopper
	var got1xx func(int, textproto.MIMEHeader) error
	if h != nil {
		got1xx = h.Got1xx
		if h.Watch != nil {
			stop.w, stop.pc = h.Watch, pc
			if !h.Watch.begin(pc) {
				pc.close()
				return nil, ctx.Err()
			}
		}
	}
	if stop.w == nil {
		stop.af = context.AfterFunc(ctx, pc.close)
	}
	fail := func(err error) (*http.Response, error) {
		stop.stop()
		pc.close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	if n, err := pc.conn.Write(wire); err != nil {
		if n == 0 {
			return fail(nothingWrittenError{err})
		}
		return fail(fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", err))
	}
	if c.responseHeader > 0 {
		_ = pc.conn.SetReadDeadline(time.Now().Add(c.responseHeader))
	}
	pc.limit = c.maxHeader
	if _, err := pc.br.Peek(1); err != nil {
		return fail(headerError(readFromServerError{err}))
	}
	if got1xx == nil {
		if trace := httptrace.ContextClientTrace(ctx); trace != nil {
			got1xx = trace.Got1xxResponse
		}
	}
	var resp *http.Response
	for {
		var err error
		resp, err = readResponse(pc.br, req)
		if err != nil {
			if pc.limit <= 0 {
				err = fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", c.maxHeader)
			}
			return fail(headerError(err))
		}
		if code := resp.StatusCode; code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			break
		}
		if got1xx != nil {
			if err := got1xx(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return fail(err)
			}
			// The 1xx went on; the next header gets the whole limit.
			pc.limit = c.maxHeader
		}
	}
	pc.limit = math.MaxInt64
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Only for requests that asked for a protocol change, which go
		// through net/http's Transport: no tunnel here.
		stop.stop()
		pc.close()
		resp.Body = http.NoBody
		return resp, nil
	}
	if resp.Body == http.NoBody {
		c.release(pc, resp, stop.stop())
		return resp, nil
	}
	if c.responseHeader > 0 && (resp.ContentLength < 0 || int64(pc.br.Buffered()) < resp.ContentLength) {
		// No timeout while the body streams, as with the Transport.
		_ = pc.conn.SetReadDeadline(time.Time{})
	}
	resp.Body = &body{body: resp.Body, c: c, pc: pc, resp: resp, ctx: ctx, stop: stop}
	return resp, nil
}

// stopper ends what closes an exchange's connection when its client
// goes away: the watch of the client's connection, or an AfterFunc on
// the request's context.
type stopper struct {
	w  *Watch
	pc *pconn
	af func() bool
}

// stop reports whether it ended it before it closed the connection.
func (s *stopper) stop() bool {
	if s.w != nil {
		return s.w.end(s.pc)
	}
	return s.af()
}

// Watch ends the exchanges of one client connection, one at a time, when
// the connection goes away: registered once per connection where a
// context.AfterFunc on each request's context would be registered and
// removed per request. Its zero value is not usable: make one with
// NewWatch.
type Watch struct {
	mu     sync.Mutex
	pc     *pconn
	gone   bool
	cancel context.CancelFunc
}

// NewWatch returns a watch whose Gone calls cancel, which must cancel
// the contexts of the connection's requests.
func NewWatch(cancel context.CancelFunc) *Watch {
	return &Watch{cancel: cancel}
}

// Gone says that the client connection went away: the contexts of its
// requests are canceled, and then the connection of the exchange in
// flight, if any, is closed, so that its failure is seen as the
// client's (the request's context has its error) and not the target's.
func (w *Watch) Gone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		return
	}
	w.gone = true
	w.cancel()
	if w.pc != nil {
		w.pc.close()
		w.pc = nil
	}
}

// begin holds pc as the connection of the exchange in flight; false when
// the client has gone.
func (w *Watch) begin(pc *pconn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		return false
	}
	w.pc = pc
	return true
}

// end lets go of pc; false when Gone closed it.
func (w *Watch) end(pc *pconn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pc != pc {
		return false
	}
	w.pc = nil
	return true
}

// headerError names a timeout while waiting for the response header as
// the Transport does.
func headerError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errAwaitingHeaders
	}
	return err
}

// errAwaitingHeaders is Options.ResponseHeaderTimeout passing before the
// response header came.
var errAwaitingHeaders error = &timeoutError{"net/http: timeout awaiting response headers"}

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// nothingWrittenError is a failure before any byte of the request left.
type nothingWrittenError struct{ error }

func (e nothingWrittenError) Unwrap() error { return e.error }

// readFromServerError is a failure to read the first byte of the response.
type readFromServerError struct{ err error }

func (e readFromServerError) Error() string {
	return "net/http: Transport failed to read from server: " + e.err.Error()
}
func (e readFromServerError) Unwrap() error { return e.err }

// retryOnNewConn reports whether a request that failed with err on a
// kept-alive connection may be sent on another, as the Transport decides:
// when nothing of it was written, or when it is idempotent and nothing of
// the response came.
func retryOnNewConn(req *http.Request, err error) bool {
	if _, ok := err.(nothingWrittenError); ok {
		return true
	}
	if !replayable(req) {
		return false
	}
	_, ok := err.(readFromServerError)
	return ok
}

// replayable reports whether a request without a body may be sent twice:
// net/http's rule (the idempotent methods, or an Idempotency-Key).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// body is a response body read from a connection, which goes back to
// the idle connections once the body has been read to its end.
type body struct {
	body io.ReadCloser
	c    *Client
	pc   *pconn
	resp *http.Response
	ctx  context.Context
	stop stopper
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.done = true
		b.c.release(b.pc, b.resp, b.stop.stop())
	case err != nil:
		b.done = true
		b.stop.stop()
		b.pc.close()
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	return n, err
}

// Close gives up on a body not read to its end: its connection is closed.
func (b *body) Close() error {
	if !b.done {
		b.done = true
		b.stop.stop()
		b.pc.close()
	}
	return nil
}

// release takes back the connection of a response read whole, for the
// next request; stopped says whether the request's context let go of it.
func (c *Client) release(pc *pconn, resp *http.Response, stopped bool) {
	if !stopped || resp.Close || pc.sawEOF {
		pc.close()
		return
	}
	if n := pc.br.Buffered(); n > 0 {
		buf, _ := pc.br.Peek(n)
		unsolicited(buf, nil)
		pc.close()
		return
	}
	pc.reused = true
	pc.idleAt = time.Now()
	c.mu.Lock()
	list := c.idle[pc.addr]
	if len(list) >= maxIdle {
		c.mu.Unlock()
		pc.close()
		return
	}
	c.idle[pc.addr] = append(list, pc)
	if !c.sweeping {
		c.sweeping = true
		time.AfterFunc(sweepEvery, c.sweep)
	}
	c.mu.Unlock()
}

// unsolicited logs bytes a target sent on an idle connection, as the
// Transport does (to the standard logger, which the gateway sends to its
// log), unless they are a 408 that a server sends before it closes an
// idle connection.
func unsolicited(buf []byte, err error) {
	if is408(buf) {
		return
	}
	log.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=%v", buf, err)
}

func is408(b []byte) bool {
	const prefix = "HTTP/1.x 408"
	return len(b) >= len(prefix) && string(b[:7]) == prefix[:7] && string(b[8:12]) == prefix[8:12]
}

// takeIdle returns the most recently used idle connection to addr that
// has not been idle too long and how long it was idle, or nil.
func (c *Client) takeIdle(addr string) (*pconn, time.Duration) {
	var stale []*pconn
	defer func() {
		for _, pc := range stale {
			pc.close()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.idle[addr]
	if len(list) == 0 {
		return nil, 0
	}
	pc := list[len(list)-1]
	list[len(list)-1] = nil
	list = list[:len(list)-1]
	idle := time.Since(pc.idleAt)
	if idle > idleTimeout {
		// The older ones are older still.
		stale = append(append(stale, pc), list...)
		clear(list)
		c.idle[addr] = list[:0]
		return nil, 0
	}
	c.idle[addr] = list
	return pc, idle
}

// sweep closes the idle connections that timed out, that their target
// closed, or that received bytes nobody asked for.
func (c *Client) sweep() {
	now := time.Now()
	c.mu.Lock()
	taken := map[string][]*pconn{}
	for addr, list := range c.idle {
		// The oldest come first; those idle for less than half a sweep
		// wait for the next.
		n := 0
		for n < len(list) && now.Sub(list[n].idleAt) >= sweepEvery/2 {
			n++
		}
		if n > 0 {
			taken[addr] = slices.Clone(list[:n])
			rest := slices.Clone(list[n:])
			clear(list)
			c.idle[addr] = rest
		}
	}
	c.mu.Unlock()

	for addr, list := range taken {
		kept := list[:0]
		for _, pc := range list {
			if now.Sub(pc.idleAt) <= idleTimeout && lookIdle(pc) == idleAlive {
				kept = append(kept, pc)
			} else {
				pc.close()
			}
		}
		taken[addr] = kept
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	more := false
	for addr, kept := range taken {
		list := append(kept, c.idle[addr]...)
		for len(list) > maxIdle {
			list[0].close()
			list = list[1:]
		}
		c.idle[addr] = list
	}
	for addr, list := range c.idle {
		if len(list) == 0 {
			delete(c.idle, addr)
		} else {
			more = true
		}
	}
	c.sweeping = more
	if more {
		time.AfterFunc(sweepEvery, c.sweep)
	}
}

// CloseIdle closes the idle connections. Connections in use are kept,
// and go back to the idle ones when their response ends.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = map[string][]*pconn{}
	c.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.close()
		}
	}
}

// What an idle connection has to read.
const (
	idleAlive  = iota // nothing: the target keeps it open
	idleClosed        // the target closed it, or it failed
	idleBytes         // bytes nobody asked for (logged)
)

// lookIdle looks at an idle connection without waiting.
func lookIdle(pc *pconn) int {
	if pc.br.Buffered() > 0 {
		buf, _ := pc.br.Peek(pc.br.Buffered())
		unsolicited(buf, nil)
		return idleBytes
	}
	var buf [64]byte
	n, err := peekSocket(pc.conn, buf[:])
	switch {
	case err == errWouldBlock:
		return idleAlive
	case n > 0:
		unsolicited(buf[:n], err)
		return idleBytes
	}
	return idleClosed
}

// appendRequest appends req as the Transport writes a request without a
// body, after the Transport's checks of its method and header fields.
func appendRequest(b []byte, req *http.Request) ([]byte, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return b, fmt.Errorf("net/http: invalid method %q", method)
	}
	keys := make([]string, 0, 32)
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return b, fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				// Not the value: it may be secret.
				return b, fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		keys = append(keys, k)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !plainHost(host) {
		// A host to clean (an internationalized name, an IPv6 zone):
		// net/http's own writer does that.
		var buf bytes.Buffer
		if err := req.Write(&buf); err != nil {
			return b, err
		}
		return append(b, buf.Bytes()...), nil
	}
	uri := req.URL.RequestURI()
	if strings.IndexFunc(uri, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return b, errors.New("net/http: can't write control character in Request.URL")
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	ua := "Go-http-client/1.1"
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
	}
	if ua != "" {
		// Trimmed after the test, as net/http does: a value of white
		// space alone is written empty, not left out.
		b = append(b, "User-Agent: "...)
		b = append(b, fieldValue(ua)...)
		b = append(b, "\r\n"...)
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		b = append(b, "Content-Length: 0\r\n"...)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, fieldValue(v)...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), nil
}

// fieldValue is v as net/http writes a header value: line breaks turned
// into spaces, surrounding white space trimmed.
func fieldValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	return textproto.TrimString(v)
}

// plainHost reports whether host needs no cleaning before it is written:
// ASCII, valid in a Host header, no IPv6 zone.
func plainHost(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 || host[i] == '%' {
			return false
		}
	}
	return httpguts.ValidHostHeader(host)
}

func validMethod(method string) bool {
	for _, r := range method {
		if !httpguts.IsTokenRune(r) {
			return false
		}
	}
	return method != ""
}

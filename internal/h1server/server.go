package h1server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 connections with Handler, handing each one it
// does not take on to Fallback.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the reading of a request's header from
	// its first byte; IdleTimeout the wait for the next request.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// ErrorLog takes what net/http's server would log (nil: the
	// standard logger).
	ErrorLog *log.Logger
	// ConnContext gives the context of a connection's requests.
	ConnContext func(context.Context, net.Conn) context.Context
	// Fallback takes over a connection whose next request this server
	// does not take on, with the bytes read of it and not used, which
	// come first; false when it could not (the connection is then
	// closed).
	Fallback func(c net.Conn, unread []byte) bool
	// Park, when set, lets go of a connection that has waited ParkAfter
	// for its next request, to be waited on elsewhere until deadline
	// (zero: none) and served again as a new one; false when it cannot
	// be parked (the wait goes on here).
	Park      func(c net.Conn, deadline time.Time) bool
	ParkAfter time.Duration
	// WatchAfter is how long a request's handler runs before the
	// connection is read in the background, so that a client that goes
	// away is noticed (its context canceled); 0 means 50 ms.
	WatchAfter time.Duration

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing atomic.Bool
	date    dateCache
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (s *Server) shuttingDown() bool { return s.closing.Load() }

// Serve accepts connections from l and serves each on a goroutine of its
// own until l fails or the server is shut down.
func (s *Server) Serve(l net.Listener) error {
	for {
		rwc, err := l.Accept()
		if err != nil {
			if s.shuttingDown() {
				return ErrServerClosed
			}
			return err
		}
		c := &conn{srv: s, rwc: rwc}
		if !s.track(c) {
			rwc.Close()
			continue
		}
		go c.serve()
	}
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown() {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops taking connections, closes those waiting for a request
// and waits, until ctx ends, for the others to finish their response
// (each is closed after it, as net/http's Shutdown does).
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	wait := time.Millisecond
	for {
		if s.closeIdle() {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// closeIdle closes the connections waiting for a request, and reports
// whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

// Close closes every connection at once.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.state.Store(stateClosed)
		c.rwc.Close()
	}
	return nil
}

// Connection states: waiting for a request (closed by Shutdown), serving
// one, closed.
const (
	stateActive int32 = iota
	stateIdle
	stateClosed
)

// conn is one client connection being served.
type conn struct {
	srv   *Server
	rwc   net.Conn
	state atomic.Int32
	// in holds what was read of the connection; in[r:w] is not used yet.
	in   []byte
	r, w int
	bufw *bufio.Writer
	werr error
	// base carries the connection's context and remote address into
	// each request, copied.
	base     *http.Request
	lenBuf   [20]byte
	hijacked bool
	// rdl is the read deadline last set, when rdlKnown.
	rdl      time.Time
	rdlKnown bool
	// noPark is set once Park declined the connection.
	noPark bool
	watch  backgroundRead
}

var (
	inBufs  = sync.Pool{New: func() any { b := make([]byte, inBufferSize); return &b }}
	outBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

// inBufferSize bounds the request header this server takes on; a longer
// one goes to the fallback.
const inBufferSize = 4096

// errFallback ends the reading of a request this server hands over.
var errFallback = errors.New("request left to the fallback")

// errParked ends the serving of a connection parked while idle.
var errParked = errors.New("connection parked")

func (c *conn) serve() {
	defer c.srv.untrack(c)
	ctx := context.Background()
	if c.srv.ConnContext != nil {
		ctx = c.srv.ConnContext(ctx, c.rwc)
	}
	c.base = (&http.Request{RemoteAddr: c.rwc.RemoteAddr().String()}).WithContext(ctx)
	inBuf := inBufs.Get().(*[]byte)
	c.in = *inBuf
	c.bufw = outBufs.Get().(*bufio.Writer)
	c.bufw.Reset(connWriter{c})
	defer func() {
		c.bufw.Reset(nil)
		outBufs.Put(c.bufw)
		c.in = nil
		inBufs.Put(inBuf)
	}()
	idleSince := time.Now()
	for {
		req, err := c.readRequest(idleSince)
		switch {
		case errors.Is(err, errParked), c.hijacked:
			return
		case errors.Is(err, errFallback):
			unread := bytes.Clone(c.in[c.r:c.w])
			c.state.Store(stateClosed)
			if c.srv.Fallback == nil || !c.srv.Fallback(c.rwc, unread) {
				c.rwc.Close()
			}
			return
		case err != nil:
			c.rwc.Close()
			return
		}
		w := c.serveRequest(req)
		if c.hijacked {
			return
		}
		if w == nil || c.flushOut() != nil || !w.reusable() || c.srv.shuttingDown() {
			c.rwc.Close()
			return
		}
		idleSince = time.Now()
	}
}

// readRequest waits for the next request and reads its header: a
// request this server takes, or errFallback with nothing of it used.
func (c *conn) readRequest(idleSince time.Time) (*http.Request, error) {
	var headerDeadline time.Time
	for {
		if c.r < c.w {
			if !mayTake(c.in[c.r:c.w]) {
				return nil, errFallback
			}
			if end := bytes.Index(c.in[c.r:c.w], crlfcrlf); end >= 0 {
				head := c.in[c.r : c.r+end+4]
				req := parseRequest(head, c.base)
				if req == nil {
					return nil, errFallback
				}
				c.r += end + 4
				return req, nil
			}
			if c.r == 0 && c.w == len(c.in) {
				// Longer than this server takes.
				return nil, errFallback
			}
			if headerDeadline.IsZero() && c.srv.ReadHeaderTimeout > 0 {
				headerDeadline = time.Now().Add(c.srv.ReadHeaderTimeout)
			}
		}
		if c.r > 0 {
			c.w = copy(c.in, c.in[c.r:c.w])
			c.r = 0
		}
		idle := c.w == 0
		if idle {
			// Shutdown closes the connections that wait here.
			if !c.state.CompareAndSwap(stateActive, stateIdle) || c.srv.shuttingDown() {
				return nil, net.ErrClosed
			}
			c.idleDeadline(idleSince)
		} else {
			c.setReadDeadline(headerDeadline)
		}
		n, err := c.rwc.Read(c.in[c.w:])
		c.w += n
		if idle && !c.state.CompareAndSwap(stateIdle, stateActive) {
			return nil, net.ErrClosed
		}
		if n > 0 {
			continue
		}
		if err == nil {
			continue
		}
		if idle && c.parkable(err, idleSince) {
			if c.srv.Park(c.rwc, c.idleEnd(idleSince)) {
				c.state.Store(stateClosed)
				return nil, errParked
			}
			c.noPark = true
			continue
		}
		return nil, err
	}
}

// mayTake reports whether b, the first bytes of a request, may start one
// this server takes on (parseRequest has the last word).
func mayTake(b []byte) bool {
	for _, p := range [...]string{"GET /", "HEAD /"} {
		n := min(len(b), len(p))
		if string(b[:n]) == p[:n] {
			return true
		}
	}
	return false
}

var crlfcrlf = []byte("\r\n\r\n")

// idleDeadline sets the read deadline of the wait for the next request:
// the idle timeout, or sooner the time to park. A deadline set for an
// earlier wait is kept while it is not too far off, so that a busy
// connection does not change its timer on every request.
func (c *conn) idleDeadline(idleSince time.Time) {
	end := c.idleEnd(idleSince)
	if c.srv.Park != nil && c.srv.ParkAfter > 0 && !c.noPark {
		park := idleSince.Add(c.srv.ParkAfter)
		if end.IsZero() || park.Before(end) {
			end = park
			if c.rdlKnown && c.rdl.After(idleSince.Add(c.srv.ParkAfter/2)) && !c.rdl.After(park) {
				return
			}
		}
	}
	c.setReadDeadline(end)
}

func (c *conn) idleEnd(idleSince time.Time) time.Time {
	if c.srv.IdleTimeout <= 0 {
		return time.Time{}
	}
	return idleSince.Add(c.srv.IdleTimeout)
}

func (c *conn) setReadDeadline(t time.Time) {
	if c.rdlKnown && t.Equal(c.rdl) {
		return
	}
	c.rdl, c.rdlKnown = t, true
	_ = c.rwc.SetReadDeadline(t)
}

// parkable reports whether a wait for the next request that failed with
// err ended at the time to park, before the idle timeout.
func (c *conn) parkable(err error, idleSince time.Time) bool {
	if c.srv.Park == nil || c.noPark || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	end := c.idleEnd(idleSince)
	return end.IsZero() || time.Now().Before(end)
}

// serveRequest runs the handler for r; nil when it panicked.
func (c *conn) serveRequest(r *http.Request) (resp *response) {
	w := &response{c: c, req: r, handlerHeader: http.Header{}, contentLength: -1}
	body := bodyBufs.Get().(*bufio.Writer)
	w.bodyOut = chunkWriter{w}
	body.Reset(w.bodyOut)
	w.body = body
	defer func() {
		body.Reset(nil)
		bodyBufs.Put(body)
		w.body = nil
	}()
	c.watch.arm(c)
	defer func() {
		c.watch.disarm(c)
		if err := recover(); err != nil {
			if err != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.logf("http: panic serving %v: %v\n%s", r.RemoteAddr, err, buf)
			}
			if !c.hijacked {
				if w.wroteHeader && !w.headerOut {
					// Half a header: net/http would not have sent it.
					c.bufw.Reset(connWriter{c})
				}
				_ = c.bufw.Flush()
			}
			resp = nil
		}
	}()
	c.srv.Handler.ServeHTTP(w, r)
	if c.hijacked {
		return w
	}
	w.finish()
	return w
}

// flushOut writes what the connection's buffer holds.
func (c *conn) flushOut() error {
	if err := c.bufw.Flush(); err != nil {
		c.noteWriteError(err)
		return err
	}
	return c.werr
}

func (c *conn) noteWriteError(err error) {
	if c.werr == nil {
		c.werr = err
	}
}

func (c *conn) hijack() (net.Conn, *bufio.ReadWriter, error) {
	// The background read ends first: the connection's bytes are the
	// hijacker's from here.
	c.watch.disarm(c)
	c.hijacked = true
	c.state.Store(stateClosed)
	_ = c.rwc.SetDeadline(time.Time{})
	unread := bytes.Clone(c.in[c.r:c.w])
	br := bufio.NewReader(io.MultiReader(bytes.NewReader(unread), c.rwc))
	bw := bufio.NewWriter(c.rwc)
	return c.rwc, bufio.NewReadWriter(br, bw), nil
}

// connWriter notes a failed write of the connection.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil {
		w.c.noteWriteError(err)
	}
	return n, err
}

// backgroundRead reads the connection while a handler runs long, as
// net/http's server does for every request, to see the client go away:
// the read fails, and the connection's own Read (ConnContext's) cancels
// the context. It starts only once the handler has run WatchAfter, so
// that a quick exchange costs a timer and not a goroutine, a read and
// the abort of that read.
type backgroundRead struct {
	mu      sync.Mutex
	timer   *time.Timer
	armed   bool
	reading bool
	done    chan struct{}
	// got is a byte the read returned: the start of the next request.
	got  [1]byte
	n    int
	err  error
	conn *conn
}

func (b *backgroundRead) arm(c *conn) {
	d := c.srv.WatchAfter
	if d <= 0 {
		d = 50 * time.Millisecond
	}
	b.mu.Lock()
	b.armed = true
	b.mu.Unlock()
	if b.timer == nil {
		b.conn = c
		b.timer = time.AfterFunc(d, b.run)
		return
	}
	b.timer.Reset(d)
}

func (b *backgroundRead) run() {
	b.mu.Lock()
	if !b.armed || b.conn.r < b.conn.w {
		// Done already, or a pipelined request is waiting: reading
		// would see nothing of a client gone.
		b.mu.Unlock()
		return
	}
	b.reading = true
	b.done = make(chan struct{})
	b.mu.Unlock()
	n, err := b.conn.rwc.Read(b.got[:])
	b.mu.Lock()
	b.n, b.err = n, err
	b.reading = false
	close(b.done)
	b.mu.Unlock()
}

// disarm ends the watch once the handler has returned, and keeps what it
// read.
func (b *backgroundRead) disarm(c *conn) {
	b.mu.Lock()
	b.armed = false
	reading, done := b.reading, b.done
	b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	if done == nil {
		return
	}
	if reading {
		_ = c.rwc.SetReadDeadline(time.Unix(1, 0))
		c.rdlKnown = false
	}
	<-done
	b.mu.Lock()
	b.done = nil
	n, err := b.n, b.err
	b.n, b.err = 0, nil
	b.mu.Unlock()
	if n > 0 {
		if c.r > 0 {
			c.w = copy(c.in, c.in[c.r:c.w])
			c.r = 0
		}
		c.in[c.w] = b.got[0]
		c.w++
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && n == 0 {
		c.noteWriteError(fmt.Errorf("reading the connection: %w", err))
	}
}

package edge

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/h1client"
	"github.com/gmgate/gmgate/internal/upstream"
)

// httpConn is an established connection handed to the HTTP server, with
// what its handshake negotiated for ConnContext.
type HTTPConn struct {
	net.Conn
	Info *forward.ConnInfo
	// write bounds each write, so that a client that stops reading does
	// not hold its connection (and the upstream's) forever; a long
	// response to a client that keeps reading is not limited.
	Bound upstream.WriteBound
	// framing watches the request headers (read by one goroutine at a
	// time: net/http's) of HTTP/1.
	framing forward.FramingSniffer
	// listener takes the connection back after it was parked while idle
	// (idle.go).
	Listener *ConnListener
	idleState
	// h2Allowed lets the client speak HTTP/2 (see handleConn); h2 is set
	// once its first bytes were the HTTP/2 preface.
	H2Allowed, h2 bool
	// start holds the first bytes read since the HTTP server took the
	// connection (up to 4), until started says whether they began the
	// HTTP/2 preface; refused is set once they did on a connection that
	// may not speak HTTP/2.
	start            [4]byte
	startLen         int
	started, refused bool
	// rd holds read deadlines back until a read needs them.
	rd readDeadline
	// watch sees the connection go away (Context).
	watch *h1client.Watch
	// replay holds bytes read of the connection by the HTTP/1.1 server
	// that handed it over (HandOff), for its next reads.
	replay []byte
}

// Context is the HTTP server's ConnContext for the connection, on ctx:
// a context that is canceled when a read of the connection fails other
// than by a timeout (the client went away, or the server closed it),
// with a watch (Info.Watch) that then also ends the upstream exchange
// of a request forwarded on the handler's goroutine. One registration
// per connection takes the place of one per request: net/http's own
// background read, which sees the client go, reads through Read.
// Timeouts are left to the HTTP server: a read deadline set in the past
// is how it ends its background read when a request is done.
func (c *HTTPConn) Context(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	c.watch = h1client.NewWatch(cancel)
	c.Info.Watch = c.watch
	return context.WithValue(ctx, forward.ConnInfoKey{}, c.Info)
}

// http2Preface starts every HTTP/2 connection (RFC 9113 §3.4); no HTTP/1
// request starts with its first word.
const HTTP2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// errHTTP2NotAllowed ends a connection that starts HTTP/2 without having
// chosen it.
var errHTTP2NotAllowed = errors.New("the client sent the HTTP/2 preface on a connection that did not choose h2")

func (c *HTTPConn) Read(b []byte) (int, error) {
	if c.refused {
		return 0, errHTTP2NotAllowed
	}
	if len(c.replay) > 0 {
		// Checked and scanned as they were first read.
		n := copy(b, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	c.rd.beginRead(c.Conn)
	n, err := c.Conn.Read(b)
	c.rd.endRead()
	if err != nil && c.watch != nil && !c.h2 && !isTimeout(err) {
		c.watch.Gone()
	}
	if !c.started && n > 0 && !c.checkStart(b[:n]) {
		return 0, errHTTP2NotAllowed
	}
	if !c.h2 && c.framing.Scan(b[:n]) {
		c.Info.AmbiguousFraming.Store(true)
	}
	if c.idle {
		return c.idleRead(n, err)
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// checkStart watches the first bytes of the connection, b the latest
// read of them, and reports whether the connection may go on. The HTTP
// server serves HTTP/2 to any connection that starts with the preface
// (it is set to on every listener, so that a reload that changes a
// listener's protocol needs no new server); this is where a connection
// that may not is stopped. The first 4 bytes decide, however the client
// split them: net/http waits for the whole preface, across reads.
func (c *HTTPConn) checkStart(b []byte) bool {
	c.startLen += copy(c.start[c.startLen:], b)
	if string(c.start[:c.startLen]) != HTTP2Preface[:c.startLen] {
		c.started = true
		return true
	}
	if c.startLen < len(c.start) {
		return true
	}
	c.started = true
	if !c.H2Allowed {
		c.refused = true
		return false
	}
	c.h2 = true
	return true
}

// restart makes the connection's next bytes be checked as a new start:
// the HTTP server takes a connection back from parking as a new one, and
// would serve HTTP/2 to one that sends the preface then. A parked
// connection spoke HTTP/1 (HTTP/2 ones are not parked), and stays so.
func (c *HTTPConn) restart() {
	c.H2Allowed = false
	c.started = false
	c.startLen = 0
}

// Write bounds each write (see writeBound).
func (c *HTTPConn) Write(b []byte) (int, error) {
	c.Bound.Arm(c.Conn)
	return c.Conn.Write(b)
}

// SetWriteDeadline passes a deadline on (the next Write sets its own
// again), but not net/http's clearing of it after each response: every
// write sets its own deadline, so the one in place is kept for the next.
func (c *HTTPConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	c.Bound.Forget()
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline passes the deadline on; the next Write sets its own again.
func (c *HTTPConn) SetDeadline(t time.Time) error {
	c.Bound.Forget()
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	c.rd.pending = false
	c.rd.set = t
	return c.Conn.SetDeadline(t)
}

// connListener is a net.Listener fed with established connections, for
// an http.Server.
type ConnListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	// parked are its idle keep-alive connections that wait for their
	// next request outside the HTTP server (idle.go).
	parked parkedConns
}

func NewConnListener(addr net.Addr) *ConnListener {
	return &ConnListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *ConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// push hands c to the HTTP server; false when the listener is closed.
func (l *ConnListener) Push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// HandOff pushes c, an HTTPConn that the HTTP/1.1 server does not serve
// on, to the HTTP server that takes l, with unread, the bytes read of it
// and not used, first.
func (l *ConnListener) HandOff(c net.Conn, unread []byte) bool {
	hc, ok := c.(*HTTPConn)
	if !ok {
		return false
	}
	hc.replay = unread
	return l.Push(hc)
}

func (l *ConnListener) close() {
	l.once.Do(func() {
		close(l.done)
		l.parked.closeAll()
	})
}

func (l *ConnListener) Close() error { l.close(); return nil }

func (l *ConnListener) Addr() net.Addr { return l.addr }

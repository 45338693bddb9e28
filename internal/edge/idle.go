package edge

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// An idle keep-alive connection in net/http's server holds a goroutine
// whose stack has grown to the depth of a proxied request, a 4 KiB read
// buffer and a 4 KiB write buffer, for as long as the client keeps it
// open. Once a connection has waited idleParkAfter for its next request,
// it is parked instead: the HTTP server lets it go (its goroutine ends and
// the buffers return to their pools) and a goroutine with a small stack
// waits until the socket has bytes to read, without reading them; then
// the connection goes back to the HTTP server as if newly accepted.
// Connections that get their next request sooner never leave the HTTP
// server, so busy clients pay nothing for this. The idle timeout
// (timeouts.idle) still counts from the end of the last response.
//
// A wait cut short for parking has found no whole record: TLCP and TLS
// keep what part of one they read, and whatever is still to come reaches
// the socket, where the parked goroutine sees it.

// idleParkAfter is how long a keep-alive connection waits in the HTTP
// server before it is parked.
const IdleParkAfter = 250 * time.Millisecond

// errParked ends the HTTP server's wait for the next request of a
// connection that is being parked.
var errParked = errors.New("idle keep-alive connection parked")

// idleState is the parking state of an httpConn.
type idleState struct {
	// idle is set from the end of a response until the next request's
	// first bytes arrive; only the HTTP server's goroutine of the
	// connection uses it.
	idle bool
	// idleDeadline is the read deadline the HTTP server set for the wait
	// (zero: none).
	idleDeadline time.Time
	// parking is set when the wait ended with errParked: the HTTP
	// server's Close then parks the connection instead of closing it.
	parking atomic.Bool
	// sock is the client's socket, waited on while parked; connections
	// without one are not parked.
	Sock syscall.Conn
}

// httpConnState is the HTTP server's ConnState hook: an HTTP/1 connection
// whose response is done starts waiting for its next request. An HTTP/2
// connection is never parked: its frames are read on a goroutine of
// their own while the server's goroutine reports the states, and h2 was
// set by the connection's first read, before either started.
func HTTPConnState(c net.Conn, st http.ConnState) {
	if hc, ok := c.(*HTTPConn); ok && st == http.StateIdle && !hc.h2 {
		hc.idle = true
	}
}

// SetReadDeadline passes the deadline on, except for the HTTP server's
// wait for the next request, which ends at idleParkAfter at the latest.
func (c *HTTPConn) SetReadDeadline(t time.Time) error {
	if c.h2 {
		// Its frames are read all the time: set at once.
		return c.rd.setNow(c.Conn, t)
	}
	if !c.idle || c.Sock == nil {
		return c.rd.ask(c.Conn, t)
	}
	c.idleDeadline = t
	park := time.Now().Add(IdleParkAfter)
	if !t.IsZero() && t.Before(park) {
		park = t
	}
	return c.rd.ask(c.Conn, park)
}

// idleRead finishes a Read made while waiting for the next request: the
// wait ends with the request's first bytes, or with errParked when the
// read timed out at idleParkAfter rather than at the idle deadline.
func (c *HTTPConn) idleRead(n int, err error) (int, error) {
	if c.Sock == nil {
		return n, err
	}
	if n > 0 {
		// The next request came in time; the HTTP server sets the
		// deadline for reading it next.
		c.idle = false
		return n, err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && (c.idleDeadline.IsZero() || time.Now().Before(c.idleDeadline)) {
		c.idle = false
		c.parking.Store(true)
		return 0, errParked
	}
	return n, err
}

// Close parks a connection whose idle wait was cut short by parking, and
// closes any other.
func (c *HTTPConn) Close() error {
	if c.parking.CompareAndSwap(true, false) {
		c.Listener.park(c)
		return nil
	}
	return c.Conn.Close()
}

// Park parks c, an HTTPConn waiting for its next request in the HTTP/1.1
// server, until it has bytes to read or deadline passes; false when it
// cannot be parked.
func Park(c net.Conn, deadline time.Time) bool {
	hc, ok := c.(*HTTPConn)
	if !ok || hc.Sock == nil || hc.Listener == nil || hc.h2 {
		return false
	}
	hc.idleDeadline = deadline
	hc.Listener.park(hc)
	return true
}

// parkedConns are a listener's parked connections, so that closing the
// listener (shutdown, or a reload that removes it) closes them.
type parkedConns struct {
	mu     sync.Mutex
	conns  map[*HTTPConn]struct{}
	closed bool
}

func (p *parkedConns) add(c *HTTPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.conns == nil {
		p.conns = map[*HTTPConn]struct{}{}
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *parkedConns) remove(c *HTTPConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// closeAll closes the parked connections and every one parked later.
func (p *parkedConns) closeAll() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// park waits, in a goroutine of its own, until c's socket has bytes to
// read (or the idle deadline passes), then hands c back to the HTTP
// server.
func (l *ConnListener) park(c *HTTPConn) {
	if !l.parked.add(c) {
		c.Conn.Close()
		return
	}
	go l.waitParked(c)
}

func (l *ConnListener) waitParked(c *HTTPConn) {
	err := c.rd.setNow(c.Conn, c.idleDeadline)
	if err == nil {
		err = waitReadable(c.Sock)
	}
	l.parked.remove(c)
	c.restart()
	if err != nil || !l.Push(c) {
		c.Conn.Close()
	}
}

// ParkedCount is the number of connections parked now.
func (l *ConnListener) ParkedCount() int {
	l.parked.mu.Lock()
	defer l.parked.mu.Unlock()
	return len(l.parked.conns)
}

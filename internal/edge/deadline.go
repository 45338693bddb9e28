package edge

import (
	"net"
	"sync"
	"time"
)

// readDeadline defers the read deadlines set on an HTTPConn until a read
// needs one. net/http sets the read deadline of an HTTP/1 connection six
// times per keep-alive request (the header timeout, its clearing, the
// abort of the background read and its clearing, the idle timeout and
// its clearing), and most of them are replaced before anything is read:
// each one set on the socket costs a clock read and a change of the
// runtime's timers. A deadline set while no read is under way is only
// noted, and the next read sets the last one noted; one set while a read
// is under way (the abort of net/http's background read, any deadline of
// an HTTP/2 connection, whose frames are read by a goroutine of their
// own) goes to the socket at once. Deadlines are points in time, so one
// set later, before the read it bounds, bounds it alike.
type readDeadline struct {
	mu sync.Mutex
	// reading counts the reads under way.
	reading int
	// want is the deadline last asked for, pending while it differs from
	// the one on the connection, set.
	want, set time.Time
	pending   bool
}

// ask notes t as the read deadline of c, or sets it when a read is under
// way.
func (d *readDeadline) ask(c net.Conn, t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reading > 0 {
		d.pending = false
		d.set = t
		return c.SetReadDeadline(t)
	}
	d.want = t
	d.pending = !t.Equal(d.set)
	return nil
}

// beginRead sets the pending deadline, if any, before a read of c.
func (d *readDeadline) beginRead(c net.Conn) {
	d.mu.Lock()
	if d.pending {
		d.pending = false
		d.set = d.want
		_ = c.SetReadDeadline(d.want)
	}
	d.reading++
	d.mu.Unlock()
}

func (d *readDeadline) endRead() {
	d.mu.Lock()
	d.reading--
	d.mu.Unlock()
}

// setNow records t, set on c directly (SetDeadline, parking), as the
// deadline in place.
func (d *readDeadline) setNow(c net.Conn, t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending = false
	d.set = t
	return c.SetReadDeadline(t)
}

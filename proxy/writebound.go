package proxy

import (
	"net"
	"sync/atomic"
	"time"
)

// writeBound bounds each write on a connection by timeout. The deadline
// is moved only once the one set is nearer than timeout, and then set an
// eighth of timeout further, so that a connection's writes move it once
// in that eighth rather than each time: a write that blocks gives up
// after timeout at the earliest and 9/8 of it at the latest. Whoever sets
// another deadline on the connection calls forget.
type writeBound struct {
	timeout time.Duration
	// deadline is the write deadline arm set last, in Unix nanoseconds;
	// 0 once another was set.
	deadline atomic.Int64
}

// arm gives c's next write timeout from now at least; with no timeout,
// none.
func (w *writeBound) arm(c net.Conn) {
	if w.timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Add(w.timeout).UnixNano() > w.deadline.Load() {
		d := now.Add(w.timeout + w.timeout/8)
		w.deadline.Store(d.UnixNano())
		_ = c.SetWriteDeadline(d)
	}
}

// forget makes the next arm set the deadline again.
func (w *writeBound) forget() { w.deadline.Store(0) }

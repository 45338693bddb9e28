package upstream

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
type WriteBound struct {
	Timeout time.Duration
	// deadline is the write deadline arm set last, in Unix nanoseconds;
	// 0 once another was set.
	Deadline atomic.Int64
}

// arm gives c's next write timeout from now at least; with no timeout,
// none.
func (w *WriteBound) Arm(c net.Conn) {
	if w.Timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Add(w.Timeout).UnixNano() > w.Deadline.Load() {
		d := now.Add(w.Timeout + w.Timeout/8)
		w.Deadline.Store(d.UnixNano())
		_ = c.SetWriteDeadline(d)
	}
}

// forget makes the next arm set the deadline again.
func (w *WriteBound) Forget() { w.Deadline.Store(0) }

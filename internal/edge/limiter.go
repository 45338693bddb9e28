package edge

import (
	"context"
	"time"
)

// handshakeLimiter bounds the handshakes in progress on one listener. A
// connection asks for a slot once its ClientHello is in and waits up to
// wait for one; it is refused after that, so a flood of new connections
// costs a bounded number of goroutines, not memory without end.
type HandshakeLimiter struct {
	slots chan struct{}
	wait  time.Duration
}

func NewHandshakeLimiter(n int, wait time.Duration) *HandshakeLimiter {
	return &HandshakeLimiter{slots: make(chan struct{}, n), wait: wait}
}

func (l *HandshakeLimiter) Acquire(ctx context.Context) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	return l.acquireSlow(ctx.Done(), l.wait)
}

// AcquireBy is Acquire for a connection that must have its slot by
// deadline: a free slot is taken at once, without a timer or a context;
// else it waits up to wait, or until deadline if that comes first.
func (l *HandshakeLimiter) AcquireBy(deadline time.Time) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	wait := min(l.wait, time.Until(deadline))
	if wait <= 0 {
		return false
	}
	return l.acquireSlow(nil, wait)
}

func (l *HandshakeLimiter) acquireSlow(done <-chan struct{}, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-done:
		return false
	}
}

func (l *HandshakeLimiter) Release() { <-l.slots }

// InUse is the number of slots taken now.
func (l *HandshakeLimiter) InUse() int { return len(l.slots) }

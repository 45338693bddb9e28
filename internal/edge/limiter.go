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
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (l *HandshakeLimiter) Release() { <-l.slots }

// InUse is the number of slots taken now.
func (l *HandshakeLimiter) InUse() int { return len(l.slots) }

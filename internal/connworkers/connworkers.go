// Package connworkers runs connections on goroutines that are kept for
// the next connection once theirs has ended.
//
// A new goroutine's stack grows, copied each time, to the depth of a
// handshake; a kept one has grown already (until the garbage collector
// shrinks it again). At most MaxIdle goroutines wait, each for about
// IdleTimeout at most, so a burst of connections leaves no crowd of
// goroutines behind.
package connworkers

import (
	"sync/atomic"
	"time"
)

const (
	// MaxIdle bounds the goroutines waiting for a connection.
	MaxIdle = 64
	// IdleTimeout is how long a goroutine waits for a connection.
	IdleTimeout = 10 * time.Second
)

// Pool runs functions on waiting goroutines, or on new ones. The zero
// value is not usable: call New.
type Pool struct {
	conns chan func() // unbuffered: taken only by a waiting worker
	idle  atomic.Int32
	live  atomic.Int32 // workers, waiting or not
	done  chan struct{}
}

// New returns a pool without goroutines.
func New() *Pool {
	return &Pool{conns: make(chan func()), done: make(chan struct{})}
}

// Run runs conn on a waiting goroutine, or on a new one; it does not wait
// for conn to return.
func (p *Pool) Run(conn func()) {
	select {
	case p.conns <- conn:
	default:
		p.live.Add(1)
		go p.work(conn)
	}
}

func (p *Pool) work(conn func()) {
	defer p.live.Add(-1)
	var t *time.Timer
	for {
		conn()
		if p.idle.Add(1) > MaxIdle {
			p.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(IdleTimeout)
		} else {
			t.Reset(IdleTimeout)
		}
		select {
		case conn = <-p.conns:
			p.idle.Add(-1)
		case <-t.C:
			p.idle.Add(-1)
			return
		case <-p.done:
			p.idle.Add(-1)
			t.Stop()
			return
		}
	}
}

// Stop lets the waiting goroutines go; those running a connection end
// when it returns. A function Run is given after Stop still runs, on a
// goroutine that ends with it.
func (p *Pool) Stop() { close(p.done) }

// Live returns the goroutines of the pool, waiting or not.
func (p *Pool) Live() int { return int(p.live.Load()) }

// Idle returns the goroutines waiting for a connection.
func (p *Pool) Idle() int { return int(p.idle.Load()) }

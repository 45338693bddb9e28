package forward

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
)

// TCP copies the decrypted stream to a target of a tcp pool and
// back, passing half-closes through, until both directions end or the
// connection stays idle too long.
// dial bounds connecting to the target, idle the time the connection may
// move no byte either way.
func (f *Forwarder) TCP(p *upstream.Pool, client net.Conn, info *ConnInfo, dial, idle time.Duration) {
	defer client.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), dial)
	target, t, err := p.DialTCP(ctx)
	cancel()
	if err != nil {
		p.FailLog.Log("upstream failed", FailureAttrs(p, err, slog.String("client", AddrString(info.Client)))...)
		f.logTCP(info, p.Name, "", 0, 0, time.Since(start), err)
		return
	}
	defer target.Close()
	t.Inflight.Add(1)
	defer t.Inflight.Add(-1)
	f.Metrics.UpstreamRequests.WithLabelValues(p.Name, "connected").Inc()

	var in, out atomic.Int64
	// The connection is idle when it moves no byte either way: a
	// direction that waits while the other one moves (an upload answered
	// once it is in, a download the client listens to in silence) is
	// not.
	moved := &lastMove{}
	moved.note()
	// A direction that ends cleanly (its reader's EOF) is half-closed
	// on the other side; one that fails (a reset, a connection closed at
	// shutdown or by a reload, idle for timeouts.idle) ends both, so that
	// the other direction does not wait on a peer that will never hear
	// from it again.
	abort := func() {
		client.Close()
		target.Close()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n, err := io.Copy(&idleWriter{c: target, bound: upstream.WriteBound{Timeout: idle}}, idleReader{client, idle, moved})
		in.Store(n)
		if err != nil {
			abort()
			return
		}
		closeWrite(target)
	}()
	go func() {
		defer wg.Done()
		n, err := io.Copy(&idleWriter{c: client, bound: upstream.WriteBound{Timeout: idle}}, idleReader{target, idle, moved})
		out.Store(n)
		if err != nil {
			abort()
			return
		}
		closeWrite(client)
	}()
	wg.Wait()
	f.logTCP(info, p.Name, t.Addr, in.Load(), out.Load(), time.Since(start), nil)
}

func (f *Forwarder) logTCP(info *ConnInfo, upstream, target string, in, out int64, d time.Duration, err error) {
	if f.Access != nil {
		f.Access.TCP(info, &observe.TCPLine{Upstream: upstream, Target: target, In: in, Out: out, Duration: d, Err: err})
	}
}

// lastMove is when a connection forwarded whole last moved a byte, in
// either direction, in Unix nanoseconds.
type lastMove struct{ at atomic.Int64 }

func (m *lastMove) note() { m.at.Store(time.Now().UnixNano()) }

func (m *lastMove) time() time.Time { return time.Unix(0, m.at.Load()) }

// idleReader fails a read once the connection has moved no byte, in
// either direction, for idle.
type idleReader struct {
	c     net.Conn
	idle  time.Duration
	moved *lastMove
}

func (r idleReader) Read(b []byte) (int, error) {
	if r.idle <= 0 {
		return r.c.Read(b)
	}
	for {
		deadline := r.moved.time().Add(r.idle)
		_ = r.c.SetReadDeadline(deadline)
		n, err := r.c.Read(b)
		if n > 0 {
			r.moved.note()
		}
		var ne net.Error
		if n > 0 || err == nil || !errors.As(err, &ne) || !ne.Timeout() || !r.moved.time().Add(r.idle).After(deadline) {
			return n, err
		}
		// The other direction moved meanwhile: wait on. A timed-out
		// read leaves TCP, TLCP and TLS connections readable.
	}
}

// idleWriter fails a write that blocks longer than idle (see
// writeBound); nothing else sets c's write deadline meanwhile.
type idleWriter struct {
	c     net.Conn
	bound upstream.WriteBound
}

func (w *idleWriter) Write(b []byte) (int, error) {
	w.bound.Arm(w.c)
	return w.c.Write(b)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

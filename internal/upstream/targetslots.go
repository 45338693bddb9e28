package upstream

import (
	"container/list"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gmgate/gmgate/internal/observe"
	"github.com/prometheus/client_golang/prometheus"
)

// targetSlots bounds the requests in flight to one target
// (max_conns_per_target): over HTTP/1.1 each holds a connection, over
// HTTP/2 a stream. Without it one HTTP/2 client, 128 requests a
// connection, makes 128 upstream connections for each of its own, and a
// hundred such clients exhaust the gateway's file descriptors.
//
// A request that finds every slot taken waits in a queue bounded in
// length (queue_size) and in time (queue_timeout), then is answered 503;
// neither counts against the target, which did nothing wrong.
//
// The slots are shared fairly between client connections: one HTTP/2
// connection holds at most half of them (at least one), so that it
// cannot take them all however many streams it opens, and when a slot
// comes free it goes to a waiting request of the client connection that
// holds fewest relative to its fair share (the slots divided by the
// client connections holding or waiting for some), oldest first among
// equals; a client connection under its share may take the queue place
// of the newest request of the one furthest over it.
type TargetSlots struct {
	max, maxQueue int
	// perClient is the most one client connection may hold.
	perClient int
	Wait      time.Duration

	Mu    sync.Mutex
	InUse int
	// clients are the client connections holding or waiting for a slot;
	// line, those waiting, in the order they began to.
	Clients map[any]*slotClient
	line    list.List // of *slotClient
	Queued  int

	inUseGauge, waitingGauge prometheus.Gauge
	queueFull, waitTimeout   prometheus.Counter
}

// slotClient is one client connection's share of a target's slots.
type slotClient struct {
	key     any
	held    int
	waiters list.List // of *slotWaiter, oldest first
	inLine  *list.Element
}

type slotWaiter struct {
	client *slotClient
	elem   *list.Element
	// ready gets nil when the slot is granted, errTargetBusy when the
	// place in the queue went to another client connection.
	ready chan error
}

// errTargetBusy is a request that found every connection to its target
// in use and could not wait for one (the queue was full, or the wait
// timed out): answered 503, never held against the target.
var ErrTargetBusy = errors.New("every connection to the target is in use")

// targetBusyError says why a request got no slot.
type TargetBusyError struct{ TimedOut bool }

func (e *TargetBusyError) Error() string {
	if e.TimedOut {
		return ErrTargetBusy.Error() + ": timed out in the queue"
	}
	return ErrTargetBusy.Error() + " and the queue is full"
}

func (e *TargetBusyError) Is(err error) bool { return err == ErrTargetBusy }

func NewTargetSlots(n, maxQueue int, wait time.Duration, m *observe.Metrics, upstream, target string) *TargetSlots {
	s := &TargetSlots{max: n, maxQueue: maxQueue, perClient: max(1, n/2), Wait: wait, Clients: map[any]*slotClient{}}
	s.inUseGauge = m.UpstreamConnsInUse.WithLabelValues(upstream, target)
	s.waitingGauge = m.UpstreamWaiting.WithLabelValues(upstream, target)
	s.queueFull = m.UpstreamRefused.WithLabelValues(upstream, target, "queue_full")
	s.waitTimeout = m.UpstreamRefused.WithLabelValues(upstream, target, "queue_timeout")
	return s
}

// acquire takes a slot for a request of the client connection client,
// waiting for one when all are in use. It returns a *targetBusyError when
// none came, or ctx's error when the request was given up meanwhile.
func (s *TargetSlots) Acquire(ctx context.Context, client any) error {
	s.Mu.Lock()
	c := s.client(client)
	if s.InUse < s.max && c.held < s.perClient {
		s.grantLocked(c)
		s.InUse++
		s.inUseGauge.Inc()
		s.Mu.Unlock()
		return nil
	}
	if s.Queued >= s.maxQueue && !s.displaceLocked(c) {
		s.forgetLocked(c)
		s.Mu.Unlock()
		s.queueFull.Inc()
		return &TargetBusyError{}
	}
	w := &slotWaiter{client: c, ready: make(chan error, 1)}
	w.elem = c.waiters.PushBack(w)
	if c.inLine == nil {
		c.inLine = s.line.PushBack(c)
	}
	s.Queued++
	s.waitingGauge.Inc()
	s.Mu.Unlock()

	timer := time.NewTimer(s.Wait)
	defer timer.Stop()
	var gaveUp error
	select {
	case err := <-w.ready:
		return err
	case <-timer.C:
		gaveUp = &TargetBusyError{TimedOut: true}
	case <-ctx.Done():
		gaveUp = ctx.Err()
	}
	s.Mu.Lock()
	if w.elem == nil {
		// Granted (or displaced) as the wait ended.
		s.Mu.Unlock()
		if err := <-w.ready; err != nil {
			return err
		}
		if ctx.Err() != nil {
			s.Release(client)
			return ctx.Err()
		}
		return nil
	}
	s.dequeueLocked(w)
	s.forgetLocked(c)
	s.Mu.Unlock()
	if ctx.Err() == nil {
		s.waitTimeout.Inc()
	}
	return gaveUp
}

// release gives back a slot of client's.
func (s *TargetSlots) Release(client any) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	c := s.Clients[client]
	if c == nil || c.held == 0 {
		return
	}
	c.held--
	if w := s.nextLocked(); w != nil {
		s.dequeueLocked(w)
		s.grantLocked(w.client)
		w.ready <- nil
	} else {
		s.InUse--
		s.inUseGauge.Dec()
	}
	s.forgetLocked(c)
}

func (s *TargetSlots) client(key any) *slotClient {
	c := s.Clients[key]
	if c == nil {
		c = &slotClient{key: key}
		s.Clients[key] = c
	}
	return c
}

func (s *TargetSlots) grantLocked(c *slotClient) { c.held++ }

// forgetLocked drops c once it holds and waits for nothing.
func (s *TargetSlots) forgetLocked(c *slotClient) {
	if c.held == 0 && c.waiters.Len() == 0 {
		delete(s.Clients, c.key)
	}
}

// dequeueLocked takes w out of the queue.
func (s *TargetSlots) dequeueLocked(w *slotWaiter) {
	c := w.client
	c.waiters.Remove(w.elem)
	w.elem = nil
	s.Queued--
	s.waitingGauge.Dec()
	if c.waiters.Len() == 0 && c.inLine != nil {
		s.line.Remove(c.inLine)
		c.inLine = nil
	}
}

// fairShare is the slots divided by the client connections holding or
// waiting for one.
func (s *TargetSlots) fairShare() int {
	return max(1, s.max/max(1, len(s.Clients)))
}

// nextLocked chooses the waiting request a freed slot goes to: that of
// the client connection holding the fewest for its share, the longest
// waiting among equals; nil when no waiting client connection may hold
// another.
func (s *TargetSlots) nextLocked() *slotWaiter {
	var best *slotClient
	for e := s.line.Front(); e != nil; e = e.Next() {
		c := e.Value.(*slotClient)
		if c.held >= s.perClient {
			continue
		}
		if best == nil || c.held < best.held {
			best = c
		}
	}
	if best == nil {
		return nil
	}
	// The client connection goes to the back of the line, so that
	// equals take turns.
	s.line.MoveToBack(best.inLine)
	return best.waiters.Front().Value.(*slotWaiter)
}

// displaceLocked makes room in a full queue for a request of c, under its
// fair share, by refusing the newest waiting request of the client
// connection furthest over its share. It reports whether it did.
func (s *TargetSlots) displaceLocked(c *slotClient) bool {
	share := s.fairShare()
	if c.held+c.waiters.Len() >= share {
		return false
	}
	var worst *slotClient
	for e := s.line.Front(); e != nil; e = e.Next() {
		o := e.Value.(*slotClient)
		if worst == nil || o.held+o.waiters.Len() > worst.held+worst.waiters.Len() {
			worst = o
		}
	}
	if worst == nil || worst.held+worst.waiters.Len() <= share {
		return false
	}
	w := worst.waiters.Back().Value.(*slotWaiter)
	s.dequeueLocked(w)
	w.ready <- &TargetBusyError{}
	s.queueFull.Inc()
	s.forgetLocked(worst)
	return true
}

// slotBody releases its request's slot when the response body is closed:
// the connection (or stream) stays in use while the body streams.
type slotBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// slotConn is the body of a 101 response: the upgraded connection, which
// httputil.ReverseProxy writes to.
type slotConn struct {
	slotBody
	w io.Writer
}

func (c *slotConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// holdUntilClosed makes resp's body release the slot when it is closed.
func holdUntilClosed(resp *http.Response, release func()) {
	if resp.Body == nil {
		release()
		return
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &slotConn{slotBody: slotBody{ReadCloser: rw, release: release}, w: rw}
		return
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, release: release}
}

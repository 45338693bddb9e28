package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/testwait"
)

// waitFor runs acquire in the background; its result arrives on the
// channel returned.
func waitFor(s *TargetSlots, ctx context.Context, client any) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, client) }()
	return done
}

func (s *TargetSlots) waiting() int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.Queued
}

func mustAcquire(t *testing.T, s *TargetSlots, client any) {
	t.Helper()
	if err := s.Acquire(context.Background(), client); err != nil {
		t.Fatalf("acquire for %v: %v", client, err)
	}
}

func busy(err error, timedOut bool) bool {
	var be *TargetBusyError
	return errors.As(err, &be) && be.TimedOut == timedOut && errors.Is(err, ErrTargetBusy)
}

// One client connection holds at most half of a target's slots; a freed
// slot goes to the waiting client connection that holds fewest.
func TestTargetSlotsShareBetweenClients(t *testing.T) {
	s := NewTargetSlots(4, 4, time.Minute, observe.NewMetrics(), "app", "t")
	mustAcquire(t, s, "a")
	mustAcquire(t, s, "a")
	a3 := waitFor(s, context.Background(), "a")
	testwait.For(t, "a's third request to wait", func() bool { return s.waiting() == 1 })
	// Two slots are free, but not for a.
	mustAcquire(t, s, "b")
	mustAcquire(t, s, "b")
	c1 := waitFor(s, context.Background(), "c")
	testwait.For(t, "c's request to wait", func() bool { return s.waiting() == 2 })

	s.Release("b") // c holds none, a its half: c's turn
	if err := <-c1; err != nil {
		t.Fatalf("c: %v", err)
	}
	select {
	case err := <-a3:
		t.Fatalf("a's third request got an answer (%v) while it held half the slots", err)
	default:
	}
	s.Release("a")
	if err := <-a3; err != nil {
		t.Fatalf("a: %v", err)
	}
	for _, c := range []string{"a", "a", "b", "c"} {
		s.Release(c)
	}
	if s.InUse != 0 || len(s.Clients) != 0 || s.waiting() != 0 {
		t.Errorf("after every release: %d in use, %d clients, %d waiting", s.InUse, len(s.Clients), s.waiting())
	}
}

// A full queue refuses at once, except a client connection under its
// fair share, which takes the place of the newest request of the one
// furthest over it.
func TestTargetSlotsFullQueue(t *testing.T) {
	s := NewTargetSlots(2, 2, time.Minute, observe.NewMetrics(), "app", "t")
	mustAcquire(t, s, "a")
	mustAcquire(t, s, "b")
	a2 := waitFor(s, context.Background(), "a")
	testwait.For(t, "a's second request to wait", func() bool { return s.waiting() == 1 })
	a3 := waitFor(s, context.Background(), "a")
	testwait.For(t, "a's third request to wait", func() bool { return s.waiting() == 2 })
	if err := s.Acquire(context.Background(), "b"); !busy(err, false) {
		t.Fatalf("b, at its share, with the queue full: %v, want refused at once", err)
	}
	c1 := waitFor(s, context.Background(), "c")
	if err := <-a3; !busy(err, false) {
		t.Fatalf("a's newest request: %v, want refused for c's", err)
	}
	// Equals (a and c hold none): the longest waiting first.
	s.Release("a")
	if err := <-a2; err != nil {
		t.Fatalf("a: %v", err)
	}
	s.Release("b")
	if err := <-c1; err != nil {
		t.Fatalf("c: %v", err)
	}
}

// A request waits queue_timeout at most; one whose client gives up
// leaves the queue.
func TestTargetSlotsWaitEnds(t *testing.T) {
	s := NewTargetSlots(1, 1, 50*time.Millisecond, observe.NewMetrics(), "app", "t")
	mustAcquire(t, s, "a")
	if err := s.Acquire(context.Background(), "b"); !busy(err, true) {
		t.Fatalf("%v, want a timeout in the queue", err)
	}
	s.Wait = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	b := waitFor(s, ctx, "b")
	testwait.For(t, "b to wait", func() bool { return s.waiting() == 1 })
	cancel()
	if err := <-b; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want the context's error", err)
	}
	if s.waiting() != 0 {
		t.Errorf("%d waiting after the client gave up", s.waiting())
	}
	s.Release("a")
	if s.InUse != 0 || len(s.Clients) != 0 {
		t.Errorf("%d in use, %d clients", s.InUse, len(s.Clients))
	}
}

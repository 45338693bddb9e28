package edge

import (
	"testing"
	"time"
)

func TestHandshakeLimiterAcquireBy(t *testing.T) {
	l := NewHandshakeLimiter(1, time.Hour)
	if !l.AcquireBy(time.Now().Add(time.Hour)) || l.InUse() != 1 {
		t.Fatalf("a free slot was not taken (%d in use)", l.InUse())
	}
	// Full: a deadline already past refuses at once, a near one when it
	// comes (well before the limiter's own hour).
	if l.AcquireBy(time.Now().Add(-time.Second)) {
		t.Fatal("took a slot that is in use, past the deadline")
	}
	if l.AcquireBy(time.Now().Add(20 * time.Millisecond)) {
		t.Fatal("took a slot that is in use")
	}
	// A waiter gets the slot once it is given back.
	got := make(chan bool)
	go func() { got <- l.AcquireBy(time.Now().Add(time.Hour)) }()
	l.Release()
	if !<-got || l.InUse() != 1 {
		t.Fatalf("the waiter did not get the released slot (%d in use)", l.InUse())
	}
	l.Release()

	// The limiter's wait bounds a later deadline.
	short := NewHandshakeLimiter(1, 20*time.Millisecond)
	short.AcquireBy(time.Now().Add(time.Hour))
	if short.AcquireBy(time.Now().Add(time.Hour)) {
		t.Fatal("took a slot that is in use")
	}
}

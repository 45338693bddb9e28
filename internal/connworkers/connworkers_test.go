package connworkers

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A connection goes to a goroutine that waits, if there is one; after a
// burst, at most MaxIdle wait, and none once the pool is stopped.
func TestPool(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := New()

	// One connection, then another: the second runs on the first's
	// goroutine.
	ran := make(chan struct{})
	p.Run(func() { ran <- struct{}{} })
	<-ran
	waitFor(t, "a goroutine waiting", func() bool { return p.Idle() == 1 })
	p.Run(func() { ran <- struct{}{} })
	<-ran
	if n := p.Live(); n != 1 {
		t.Fatalf("%d goroutines for two connections in turn, want 1", n)
	}

	// A burst of connections at once: one goroutine each while they
	// last, and MaxIdle of them left waiting.
	const burst = MaxIdle + 40
	var started, release sync.WaitGroup
	started.Add(burst)
	release.Add(1)
	for range burst {
		p.Run(func() {
			started.Done()
			release.Wait()
		})
	}
	started.Wait()
	if n := p.Live(); n != burst {
		t.Fatalf("%d goroutines for %d connections at once", n, burst)
	}
	release.Done()
	waitFor(t, "the burst to end", func() bool { return p.Live() == MaxIdle })
	if n := p.Idle(); n != MaxIdle {
		t.Fatalf("%d goroutines waiting, want %d", n, MaxIdle)
	}

	p.Stop()
	waitFor(t, "the goroutines to end", func() bool { return p.Live() == 0 })

	// After Stop a connection still runs, and its goroutine ends.
	p.Run(func() { ran <- struct{}{} })
	<-ran
	waitFor(t, "the last goroutine to end", func() bool { return p.Live() == 0 })
}

// waitFor polls cond until it holds, failing the test after a generous
// while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

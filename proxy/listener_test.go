package proxy

import (
	"sync"
	"testing"
)

// A connection goes to a worker that waits, if there is one; after a
// burst, at most maxIdleWorkers wait, and none once the accept loop ends.
func TestConnWorkers(t *testing.T) {
	w := newConnWorkers()

	// One connection, then another: the second runs on the first's
	// goroutine.
	ran := make(chan struct{})
	w.run(func() { ran <- struct{}{} })
	<-ran
	waitFor(t, "a worker waiting", func() bool { return w.idle.Load() == 1 })
	w.run(func() { ran <- struct{}{} })
	<-ran
	if n := w.live.Load(); n != 1 {
		t.Fatalf("%d workers for two connections in turn, want 1", n)
	}

	// A burst of connections at once: one goroutine each while they
	// last, and maxIdleWorkers of them left waiting.
	const burst = maxIdleWorkers + 40
	var started, release sync.WaitGroup
	started.Add(burst)
	release.Add(1)
	for range burst {
		w.run(func() {
			started.Done()
			release.Wait()
		})
	}
	started.Wait()
	if n := w.live.Load(); n != burst {
		t.Fatalf("%d workers for %d connections at once", n, burst)
	}
	release.Done()
	waitFor(t, "the burst to end", func() bool { return w.live.Load() == maxIdleWorkers })
	if n := w.idle.Load(); n != maxIdleWorkers {
		t.Fatalf("%d workers waiting, want %d", n, maxIdleWorkers)
	}

	w.stop()
	waitFor(t, "the workers to end", func() bool { return w.live.Load() == 0 })
}

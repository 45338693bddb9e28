package connworkers

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gmgate/gmgate/internal/testwait"
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
	// Idle counts a goroutine from just before its wait begins; Run hands
	// a connection only to one already waiting.
	testwait.For(t, "a goroutine waiting", func() bool { return p.Idle() == 1 && waiting() == 1 })
	p.Run(func() { ran <- struct{}{} })
	<-ran
	if n := p.Live(); n != 1 {
		t.Fatalf("%d goroutines for two connections in turn, want 1", n)
	}
	testwait.For(t, "the goroutine waiting again", func() bool { return p.Idle() == 1 && waiting() == 1 })

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
	testwait.For(t, "the burst to end", func() bool { return p.Live() == MaxIdle })
	if n := p.Idle(); n != MaxIdle {
		t.Fatalf("%d goroutines waiting, want %d", n, MaxIdle)
	}

	p.Stop()
	testwait.For(t, "the goroutines to end", func() bool { return p.Live() == 0 })

	// After Stop a connection still runs, and its goroutine ends.
	p.Run(func() { ran <- struct{}{} })
	<-ran
	testwait.For(t, "the last goroutine to end", func() bool { return p.Live() == 0 })
}

// waiting counts the goroutines blocked in Pool.work's wait for a
// connection, from a dump of every goroutine's stack.
func waiting() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		top, _, _ := strings.Cut(frames, "\n")
		if strings.Contains(header, "[select") && strings.Contains(top, "connworkers.(*Pool).work(") {
			count++
		}
	}
	return count
}

package observe

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
)

// Lines wait in the buffer until the delay passes or it fills, and keep
// their order.
func TestBufferedLog(t *testing.T) {
	var out testlog.Buffer
	l := NewBufferedLog(&out, 50*time.Millisecond)
	l.Write([]byte("one\n"))
	l.Write([]byte("two\n"))
	if got := out.String(); got != "" {
		t.Fatalf("written at once: %q", got)
	}
	testwait.For(t, "the delayed write", func() bool { return out.String() == "one\ntwo\n" })

	// A full buffer is written without waiting; many writers keep each
	// one's lines in order.
	out = testlog.Buffer{}
	l = NewBufferedLog(&out, time.Hour)
	line := strings.Repeat("x", 1000)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				l.Write([]byte(string(rune('a'+w)) + line[:200+i%50] + "\n"))
			}
		}()
	}
	wg.Wait()
	if len(out.String()) == 0 {
		t.Fatal("a full buffer was not written")
	}
	l.Flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	next := map[byte]int{}
	for _, s := range lines {
		w := s[0]
		if want := line[:200+next[w]%50]; s[1:] != want {
			t.Fatalf("writer %c: line %q out of order", w, s)
		}
		next[w]++
	}

	// Without a delay every line is written at once.
	out = testlog.Buffer{}
	l = NewBufferedLog(&out, 0)
	l.Write([]byte("now\n"))
	if got := out.String(); got != "now\n" {
		t.Fatalf("without a delay: %q", got)
	}
}

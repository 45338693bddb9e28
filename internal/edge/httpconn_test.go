package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/upstream"
)

// httpConn's writes move the write deadline only once an eighth of the
// write timeout has passed, and a write that blocks still gives up after
// the timeout (at most 9/8 of it), also after a deadline set from outside.
func TestHTTPConnWriteDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	const timeout = 400 * time.Millisecond
	c := &HTTPConn{Conn: a, Bound: upstream.WriteBound{Timeout: timeout}}
	go func() { _, _ = io.CopyN(io.Discard, b, 3) }()
	start := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	first := c.Bound.Deadline.Load()
	if d := time.Unix(0, first).Sub(start); d < timeout || d > timeout+timeout/8+time.Second {
		t.Fatalf("write deadline %v after the first write, want %v to %v", d, timeout, timeout+timeout/8)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	// net/http clears the deadline after each response: kept.
	_ = c.SetWriteDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := c.Bound.Deadline.Load(); got != first && time.Since(start) < timeout/8 {
		t.Errorf("the second write, %v after the first, moved the deadline", time.Since(start))
	}

	blocked := func() time.Duration {
		t.Helper()
		start := time.Now()
		_, err := c.Write([]byte("nobody reads this"))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked write: %v, want a deadline error", err)
		}
		return time.Since(start)
	}
	// The deadline set by the first write ends this one.
	if d := blocked(); d > timeout+timeout/8+time.Second {
		t.Errorf("blocked write gave up after %v", d)
	}
	// A deadline in the past set from outside: the next write sets its
	// own, and gives up no sooner than the timeout.
	_ = c.SetWriteDeadline(time.Unix(1, 0))
	if d := blocked(); d < timeout {
		t.Errorf("write after an outside deadline gave up after %v, want at least %v", d, timeout)
	}
}

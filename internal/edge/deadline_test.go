package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testwait"
)

// A read deadline set on an HTTPConn while nothing reads bounds the next
// read all the same; one set while a read waits ends that read; clearing
// it lets the next read wait for data.
func TestHTTPConnReadDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &HTTPConn{Conn: a}
	buf := make([]byte, 8)

	// Set, replaced, then set in the past before the read: the read
	// gives up at once.
	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	_ = c.SetReadDeadline(time.Time{})
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after a past deadline: %v, want a deadline error", err)
	}

	// Cleared: the read waits for the data.
	_ = c.SetReadDeadline(time.Time{})
	go func() { _, _ = b.Write([]byte("hi")) }()
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read after clearing the deadline: %q, %v", buf[:n], err)
	}

	// A deadline set while a read waits ends the read (net/http's abort
	// of its background read).
	done := make(chan error, 1)
	reading := make(chan struct{})
	go func() {
		close(reading)
		_, err := c.Read(buf)
		done <- err
	}()
	<-reading
	waitReading(t, c)
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("waiting read after a deadline was set: %v, want a deadline error", err)
	}

	// The same deadline set again is not set twice, and a new one
	// reaches the next read.
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if c.rd.pending {
		t.Error("a deadline already in place is pending")
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if !c.rd.pending {
		t.Error("a new deadline set while nothing reads is not pending")
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with a near deadline: %v, want a deadline error", err)
	}
}

// waitReading waits until a read of c is under way.
func waitReading(t *testing.T, c *HTTPConn) {
	t.Helper()
	testwait.For(t, "a read under way", func() bool {
		c.rd.mu.Lock()
		defer c.rd.mu.Unlock()
		return c.rd.reading > 0
	})
}

// BenchmarkHTTPConnDeadlines runs net/http's read deadlines of one
// keep-alive request on a loopback TCP connection: the header timeout and
// its clearing, the abort of the background read and its clearing, the
// idle timeout and its clearing, around one read of a request's bytes
// (waiting in the socket already).
func BenchmarkHTTPConnDeadlines(b *testing.B) {
	for _, mode := range []string{"direct", "deferred"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				chunk := make([]byte, 64<<10)
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			c := &HTTPConn{Conn: conn}
			set := c.SetReadDeadline
			if mode == "direct" {
				set = conn.SetReadDeadline
			}
			buf := make([]byte, 512)
			for b.Loop() {
				_ = set(time.Now().Add(10 * time.Second))
				_ = set(time.Time{})
				_ = set(time.Unix(1, 0))
				_ = set(time.Time{})
				_ = set(time.Now().Add(time.Minute))
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				_ = set(time.Time{})
			}
		})
	}
}

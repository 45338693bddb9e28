package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testwait"
)

// trickle writes a byte to w every gap, n at most, until a write fails
// or stop is closed.
func trickle(w io.Writer, n int, gap time.Duration, stop <-chan struct{}) {
	for range n {
		if _, err := w.Write([]byte{'x'}); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
	}
}

// bodyReader is an upstream that reads request bodies whole and counts
// those it is reading.
func bodyReader(t *testing.T, reading *atomic.Int64) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reading.Add(1)
		defer reading.Add(-1)
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "read %d bytes", n)
	}))
	t.Cleanup(up.Close)
	return up
}

// A body that sends a byte within each request_body, but fewer than
// request_body_min_rate a second, is cut with 408 once its first
// request_body of grace is spent, over HTTP/1.1 and HTTP/2, and its
// upstream request ends; one as slow whose response has started (a
// bidirectional stream) is not.
func TestTricklingBodyCut(t *testing.T) {
	p := getPKI(t)
	var reading atomic.Int64
	up := bodyReader(t, &reading)
	cfg := testConfig(p, up.URL)
	const idle, gap = 500 * time.Millisecond, 100 * time.Millisecond
	rate := 20 // a byte every 100 ms is half of it
	cfg.Timeouts.RequestBody = config.Duration(idle)
	cfg.Timeouts.RequestBodyMinRate = &rate
	s := startServer(t, cfg, nil)
	const length = 100 // 10 s at a byte every 100 ms

	t.Run("HTTP/1.1", func(t *testing.T) {
		c := dialTLCP(t, p, s)
		start := time.Now()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n", length)
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, length, gap, stop)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a trickling body: %d after %v, want 408", resp.StatusCode, time.Since(start))
		}
		t.Logf("cut after %v", time.Since(start))
	})

	t.Run("HTTP/2", func(t *testing.T) {
		pr, pw := io.Pipe()
		stop := make(chan struct{})
		defer close(stop)
		go func() { trickle(pw, length, gap, stop); pw.Close() }()
		req, _ := http.NewRequest(http.MethodPost, "https://"+s.Addr("edge").String()+"/", pr)
		req.ContentLength = length
		start := time.Now()
		resp, err := h2TLSClient(t, p).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a trickling body over HTTP/%d: %d after %v, want 408", resp.ProtoMajor, resp.StatusCode, time.Since(start))
		}
		t.Logf("cut after %v", time.Since(start))
	})
	testwait.For(t, "the upstream requests to end", func() bool { return reading.Load() == 0 })

	t.Run("answered stream", func(t *testing.T) {
		// The upstream answers at once, then echoes each byte: the
		// client sends a byte every 100 ms, as slowly as above, for
		// well past the grace, and gets every byte back.
		echo := h2cUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			b := make([]byte, 1)
			for {
				if _, err := r.Body.Read(b); err != nil {
					return
				}
				_, _ = w.Write(b)
				_ = rc.Flush()
			}
		}))
		cfg := testConfig(p, "h2c://"+echo)
		cfg.Timeouts.RequestBody = config.Duration(idle)
		cfg.Timeouts.RequestBodyMinRate = &rate
		s := startServer(t, cfg, nil)
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://"+s.Addr("edge").String()+"/", pr)
		resp, err := h2TLSClient(t, p).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		const n = 30 // 3 s: six times the grace
		b := make([]byte, 1)
		for i := range n {
			if _, err := pw.Write([]byte{'x'}); err != nil {
				t.Fatalf("byte %d: %v", i, err)
			}
			if _, err := io.ReadFull(resp.Body, b); err != nil {
				t.Fatalf("the echo of byte %d: %v; an answered stream was cut", i, err)
			}
			time.Sleep(gap) // the client's pace, not a wait for an event
		}
		pw.Close()
		if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
			t.Fatalf("the stream's end: %q %v", rest, err)
		}
	})
}

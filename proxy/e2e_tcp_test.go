package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tcpConfig is a configuration with one tcp listener, name, that
// forwards to target (a tcp:// URL); timeouts is what the timeouts
// section holds, and extra is added to the listener.
func tcpConfig(t testing.TB, name, target, timeouts, extra string) *config.Config {
	t.Helper()
	return parseConfig(t, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
timeouts: {%s}
listeners:
  - name: %s
    listen: "127.0.0.1:0"
    protocol: tcp
    routes: [{upstream: svc}]
%s
upstreams:
  svc:
    targets: [%q]
    health: {disabled: true}
`, timeouts, name, indent(extra, "    "), target))
}

// tcpGateway is a gateway with a tcp listener "app" that forwards to
// target (a tcp:// URL), with timeouts.idle set to idle; extra is added
// to the listener.
func tcpGateway(t testing.TB, target string, idle time.Duration, extra string) *Server {
	t.Helper()
	return startServer(t, tcpConfig(t, "app", target, "idle: "+idle.String(), extra), nil)
}

// dialApp connects to the tcp listener "app" of gw, for 20 s at most;
// the connection is closed when the test ends.
func dialApp(t testing.TB, gw *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", gw.Addr("app").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// TestTCPModeOneWayTransferOutlastsIdle: a connection that keeps moving
// bytes in one direction is not idle, however long the other direction
// stays quiet. An upload that takes longer than timeouts.idle, answered
// once it is in (a long COPY into a database, a file sent over a raw
// protocol), must get its answer; a download that takes that long must
// not be cut off for the client's silence.
func TestTCPModeOneWayTransferOutlastsIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	const chunks = 12 // one every 100 ms: 1.2 s, four times idle
	chunk := bytes.Repeat([]byte("x"), 1000)

	t.Run("upload", func(t *testing.T) {
		// The service reads the whole upload, then answers how much came.
		svc := testnet.Serve(t, func(c net.Conn) {
			n, _ := io.CopyN(io.Discard, c, int64(chunks*len(chunk)))
			fmt.Fprintf(c, "got %d", n)
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, c)
		})
		gw := tcpGateway(t, "tcp://"+svc, idle, "")
		c := dialApp(t, gw)
		for range chunks {
			if _, err := c.Write(chunk); err != nil {
				t.Fatalf("upload cut off: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		got, err := io.ReadAll(c)
		if want := fmt.Sprintf("got %d", chunks*len(chunk)); string(got) != want {
			t.Fatalf("answer to an upload of %v: %q (%v), want %q", chunks*100*time.Millisecond, got, err, want)
		}
	})

	// The service streams; once the client's side ends it says so.
	download := func(c net.Conn) {
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, c)
			close(done)
		}()
		for range chunks {
			select {
			case <-done:
				_, _ = c.Write([]byte("client side ended early"))
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
		_ = c.(*net.TCPConn).CloseWrite()
		<-done
	}
	for _, tlcpClient := range []bool{false, true} {
		t.Run(fmt.Sprintf("download/tlcp=%v", tlcpClient), func(t *testing.T) {
			svc := testnet.Serve(t, download)
			var c net.Conn
			var err error
			if tlcpClient {
				// A TLCP listener's route to a tcp:// upstream: the
				// client's side waits on a TLCP connection.
				p := getPKI(t)
				cfg := testConfig(p, "tcp://"+svc)
				cfg.Listeners[0].Protocol = config.ProtocolTLCP
				cfg.Listeners[0].TLS = nil
				cfg.Timeouts.Idle = config.Duration(idle)
				gw := startServer(t, cfg, nil)
				c, err = tlcp.Dial("tcp", gw.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
			} else {
				gw := tcpGateway(t, "tcp://"+svc, idle, "")
				c, err = net.Dial("tcp", gw.Addr("app").String())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, bytes.Repeat(chunk, chunks)) {
				t.Fatalf("download of %v: %d bytes (%q...), %v; want %d bytes", chunks*100*time.Millisecond, len(got), got[max(0, len(got)-30):], err, chunks*len(chunk))
			}
		})
	}

	t.Run("silent", func(t *testing.T) {
		// Quiet both ways: closed after idle.
		svc := testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
		gw := tcpGateway(t, "tcp://"+svc, idle, "")
		c := dialApp(t, gw)
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("a silent connection was not closed: %v", err)
		}
		if d := time.Since(start); d < idle/2 {
			t.Fatalf("a silent connection was closed after %v, before idle (%v)", d, idle)
		}
	})
}

// TestTCPModeStalledUpstreamIsClosed: an upstream that stops reading (a
// hung process keeps its socket open) while the client has more to send
// leaves the connection moving no byte: it is closed after
// timeouts.idle, as a client that stops reading is, rather than held,
// with its slot of max_connections, until the upstream dies.
func TestTCPModeStalledUpstreamIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	release := make(chan struct{})
	svc := testnet.Serve(t, func(c net.Conn) {
		<-release // reads nothing until the test ends
	})
	defer close(release)
	gw := tcpGateway(t, "tcp://"+svc, idle, "")
	c := dialApp(t, gw)
	// Write until every buffer on the way is full and the writes block,
	// then wait for the gateway to give up.
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 64<<10)
	start := time.Now()
	for {
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, c)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the connection to an upstream that reads nothing was still open after %v (idle %v)", d, idle)
	}
	testwait.For(t, "the connection to be released", func() bool { return gw.activeConns("app") == 0 })
}

// TestTCPModeHalfCloseBehindProxyProtocol: half-closes pass through a
// tcp listener that takes PROXY headers from its load balancer as they
// do without: an upstream that ends its side first (it said all it had
// to say) leaves the client free to go on sending.
func TestTCPModeHalfCloseBehindProxyProtocol(t *testing.T) {
	got := make(chan string, 1)
	svc := testnet.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("hello"))
		_ = c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	gw := tcpGateway(t, "tcp://"+svc, 10*time.Second, "proxy_protocol: {trusted: [127.0.0.1]}")
	c := dialApp(t, gw)
	if _, err := c.Write([]byte("PROXY TCP4 192.0.2.7 127.0.0.1 40000 443\r\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != "hello" {
		t.Fatalf("the upstream's side: %q, %v", b, err)
	}
	// The upstream's side has ended; the client's goes on.
	_, _ = c.Write([]byte("the rest of the request"))
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case b := <-got:
		if b != "the rest of the request" {
			t.Fatalf("after the upstream half-closed, it got %q from the client", b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream got no end of the client's side")
	}
}

// TestReloadCutsRemovedListenerAfterGrace: a reload that removes a
// listener lets its connections finish for timeouts.shutdown, then
// closes those still open, as shutdown does: removing a tcp listener
// ends access through it (a partner link, say) even for a connection
// that never goes quiet.
func TestReloadCutsRemovedListenerAfterGrace(t *testing.T) {
	svc := testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	gw := tcpGateway(t, "tcp://"+svc, 10*time.Second, "")
	c := dialApp(t, gw)
	echo := func() error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}

	const grace = 500 * time.Millisecond
	next := tcpConfig(t, "other", "tcp://"+svc, "shutdown: "+grace.String(), "")
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	// In flight, the connection goes on for the grace, and is closed
	// after it.
	for {
		err := echo()
		since := time.Since(reloaded)
		if err != nil {
			if since < grace/2 {
				t.Fatalf("the connection was cut %v after the reload, before the grace of %v: %v", since, grace, err)
			}
			return
		}
		if since > 8*time.Second {
			t.Fatalf("the removed listener's connection still served %v after the reload (grace %v)", since, grace)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShutdownCutsTCPModeWithSilentUpstream: once timeouts.shutdown has
// passed, shutdown closes what is left and returns, also for a TCP-mode
// connection whose upstream says nothing and ignores the end of the
// client's side: closing the client's connection ends the upstream's
// too, rather than wait on it for timeouts.idle.
func TestShutdownCutsTCPModeWithSilentUpstream(t *testing.T) {
	release := make(chan struct{})
	svc := testnet.Serve(t, func(c net.Conn) {
		<-release // reads nothing, sends nothing, never closes
	})
	defer close(release)
	cfg := tcpConfig(t, "app", "tcp://"+svc, "idle: 20s, shutdown: 300ms", "")
	gw, err := New(cfg, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	c := dialApp(t, gw)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the connection", func() bool { return gw.activeConns("app") == 1 })
	waitTCPConnected(t, gw, "svc", 1)
	// As Run does on SIGTERM.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeouts.Shutdown.D())
	defer cancel()
	start := time.Now()
	_ = gw.Shutdown(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a TCP-mode connection to a silent upstream (timeouts.shutdown 300ms, idle 20s)", d)
	}
}

// TestTCPModeResetClientReleased: a client that resets its connection
// frees its place (max_connections) at once, not after timeouts.idle,
// even when the upstream ignores the end of the client's side.
func TestTCPModeResetClientReleased(t *testing.T) {
	release := make(chan struct{})
	svc := testnet.Serve(t, func(c net.Conn) {
		<-release // reads nothing, sends nothing, never closes
	})
	defer close(release)
	gw := tcpGateway(t, "tcp://"+svc, 20*time.Second, "")
	c := dialApp(t, gw)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	waitTCPConnected(t, gw, "svc", 1)
	_ = c.(*net.TCPConn).SetLinger(0)
	c.Close() // a reset
	reset := time.Now()
	for gw.activeConns("app") != 0 {
		if time.Since(reset) > 5*time.Second {
			t.Fatal("the reset connection was still counted 5 s later (idle 20 s)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitTCPConnected waits until gw has connected n TCP-mode clients to a
// target of upstream (gmgate_upstream_requests_total{code="connected"}).
func waitTCPConnected(t *testing.T, gw *Server, upstream string, n float64) {
	t.Helper()
	connected := gw.Metrics().UpstreamRequests.WithLabelValues(upstream, "connected")
	testwait.For(t, "the upstream to be connected", func() bool { return testutil.ToFloat64(connected) >= n })
}

package tcplisten

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"
)

// accepted returns the server side of a loopback connection to ln.
func accepted(t *testing.T, ln net.Listener) *net.TCPConn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		ch <- result{c, err}
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return r.c.(*net.TCPConn)
}

type sockopts struct{ keepAlive, idle, interval, count, noDelay int }

func getSockopts(t *testing.T, c *net.TCPConn) sockopts {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var o sockopts
	var errs []error
	get := func(fd, level, name int) int {
		v, err := syscall.GetsockoptInt(fd, level, name)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	if err := rc.Control(func(fd uintptr) {
		o.keepAlive = get(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		o.idle = get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		o.interval = get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
		o.count = get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
		o.noDelay = get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	}); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		t.Fatal(err)
	}
	return o
}

// TestAcceptedConnectionsInheritKeepAlive checks the options of accepted
// connections, set only on the listener: custom values and KeepAlive
// (the net package's defaults).
func TestAcceptedConnectionsInheritKeepAlive(t *testing.T) {
	custom := Config{KeepAlive: net.KeepAliveConfig{Enable: true, Idle: 37 * time.Second, Interval: 11 * time.Second, Count: 4}}
	for _, c := range []struct {
		name   string
		listen func(context.Context, string) (net.Listener, error)
		want   sockopts
	}{
		{"custom", custom.Listen, sockopts{keepAlive: 1, idle: 37, interval: 11, count: 4, noDelay: 1}},
		{"defaults", Config{KeepAlive: KeepAlive}.Listen, sockopts{keepAlive: 1, idle: 15, interval: 15, count: 9, noDelay: 1}},
	} {
		ln, err := c.listen(context.Background(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if got := getSockopts(t, accepted(t, ln)); got != c.want {
			t.Errorf("%s: accepted connection has %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestWithoutListenerOptionsNoKeepAlive shows what the options on the
// listener replace: with the net package's per-connection keep-alive
// turned off and nothing set on the listener, connections have none.
func TestWithoutListenerOptionsNoKeepAlive(t *testing.T) {
	ln, err := (&net.ListenConfig{KeepAlive: -1}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := getSockopts(t, accepted(t, ln)); got.keepAlive != 0 {
		t.Fatalf("SO_KEEPALIVE = %d, want 0", got.keepAlive)
	}
}

// TestDeferAccept checks that a connection is handed over only once its
// first bytes have arrived, and without DeferAccept at once.
func TestDeferAccept(t *testing.T) {
	for _, deferred := range []bool{true, false} {
		c := Config{KeepAlive: KeepAlive}
		if deferred {
			c.DeferAccept = 10 * time.Second
		}
		ln, err := c.Listen(context.Background(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		tl := ln.(*net.TCPListener)
		tl.SetDeadline(time.Now().Add(300 * time.Millisecond))
		sc, err := tl.Accept()
		if !deferred {
			if err != nil {
				t.Fatalf("without DeferAccept: %v", err)
			}
			sc.Close()
			continue
		}
		if err == nil {
			sc.Close()
			t.Fatal("a connection that has sent nothing was accepted")
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("Accept: %v", err)
		}
		if _, err := cc.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		tl.SetDeadline(time.Now().Add(5 * time.Second))
		sc, err = tl.Accept()
		if err != nil {
			t.Fatalf("after the client spoke: %v", err)
		}
		buf := make([]byte, 5)
		sc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := sc.Read(buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
		sc.Close()
	}
}

func TestSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {15 * time.Second, 15}} {
		if got := seconds(c.d); got != c.want {
			t.Errorf("seconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

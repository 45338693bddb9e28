package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testnet"
)

// TestUnreadRequestBodyTimeout: timeouts.request_body bounds a body's
// pauses also when gmgate answers without forwarding it (no route, 421,
// a redirect, an upstream that is down or answers before reading it): net/http
// reads what is left of such a body before it writes the answer, and a
// client that stops sending must not hold its connection, unanswered,
// for ever.
func TestUnreadRequestBodyTimeout(t *testing.T) {
	p := getPKI(t)
	// An upstream that refuses a request as soon as its header is in,
	// without waiting for the body.
	up := testnet.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n")
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	cfg := testConfig(p, "http://"+up)
	cfg.Listeners[0].Routes = []config.Route{{Path: "/app/", Upstream: "app"}, {Path: "/down/", Upstream: "down"}}
	cfg.Upstreams["down"] = &config.Upstream{Targets: []string{"http://" + closedAddr(t)}, Health: config.Health{Disabled: true}}
	config.Defaults(cfg)
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	s := startServer(t, cfg, nil)

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/app/upload", http.StatusUnauthorized},
		{"/elsewhere", http.StatusNotFound},
		{"/down/upload", http.StatusBadGateway},
	} {
		c := dialTLCP(t, p, s)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nthe first bytes", tc.path)
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s with a stalled body: no answer after %v: %v", tc.path, time.Since(start), err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status || !resp.Close {
			t.Errorf("POST %s with a stalled body: %d, close %v; want %d and the connection closed", tc.path, resp.StatusCode, resp.Close, tc.status)
		}
	}
}

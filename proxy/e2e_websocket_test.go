package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
)

// TestUpgradedStalledUpstreamIsClosed: on an upgraded connection
// (WebSocket), an upstream that stops reading while the client has more
// to send is given up after timeouts.idle, as in TCP mode, rather than
// hold the client's connection until the upstream dies.
func TestUpgradedStalledUpstreamIsClosed(t *testing.T) {
	p := getPKI(t)
	const idle = 300 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _ := switchToWebSocket(w); c != nil {
			defer c.Close()
			<-release // reads nothing more
		}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	buf := make([]byte, 64<<10)
	start := time.Now()
	for {
		if _, err := conn.Write(buf); err != nil {
			break
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the upgraded connection to an upstream that reads nothing was still open after %v (idle %v)", d, idle)
	}
}

// TestUpgradeMismatchClosesUpstream: an upstream that switches
// protocols to another one than the client asked for (or when it asked
// for none) gets 502 for the client and its connection closed.
// ReverseProxy answered the client but left the upstream's connection
// open, which nothing would ever close (and a tlcp:// pool kept its
// client certificate's connections for it).
func TestUpgradeMismatchClosesUpstream(t *testing.T) {
	p := getPKI(t)
	closed := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+r.URL.Query().Get("to")+"\r\n\r\n")
		brw.Flush()
		_, _ = io.Copy(io.Discard, brw)
		closed <- struct{}{}
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	for _, req := range []string{
		"GET /ws?to=not-websocket HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		"POST /form?to=websocket HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok",
	} {
		conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(conn, req)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%q: status %d, want 502", req, resp.StatusCode)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: the upstream's connection is still open", req)
		}
	}
}

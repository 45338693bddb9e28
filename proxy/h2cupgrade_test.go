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
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/tlcp"
)

// TestH2CUpgradeNotForwarded: a client's request to upgrade to
// cleartext HTTP/2 (Upgrade: h2c) is not passed to the upstream. An
// upstream that takes it (hypercorn does, with or without
// "Connection: HTTP2-Settings") would turn the connection into a tunnel
// that gmgate no longer reads: the client could then send any request
// to that upstream, past the routes' paths, with forwarding and session
// headers of its own making. The request is served as a plain HTTP/1.1
// one; WebSocket upgrades still pass (TestWebSocketUpgrade).
func TestH2CUpgradeNotForwarded(t *testing.T) {
	p := getPKI(t)
	seen := make(chan http.Header, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		if r.Header.Get("Upgrade") != "h2c" {
			fmt.Fprint(w, "plain HTTP/1.1")
			return
		}
		// A lenient h2c server: it switches on Upgrade alone.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
		brw.Flush()
		_, _ = io.Copy(io.Discard, brw)
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].Routes = []config.Route{{Path: "/public/", Upstream: "app"}}
	s := startServer(t, cfg, nil)

	for _, req := range []string{
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n",
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade\r\n",
		"Upgrade: H2C\r\nConnection: upgrade\r\n",
	} {
		conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(conn, "GET /public/ HTTP/1.1\r\nHost: localhost\r\n"+req+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		h := <-seen
		if resp.StatusCode != http.StatusOK || string(body) != "plain HTTP/1.1" {
			t.Errorf("request with %q: %d %q, want 200 from a plain request", req, resp.StatusCode, body)
		}
		if h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" {
			t.Errorf("request with %q: the upstream got Upgrade %q, HTTP2-Settings %q", req, h.Get("Upgrade"), h.Get("Http2-Settings"))
		}
	}
}

func TestDropH2CUpgrade(t *testing.T) {
	for _, tc := range []struct {
		upgrade []string
		want    string // "" for no Upgrade header
	}{
		{[]string{"h2c"}, ""},
		{[]string{"websocket"}, "websocket"},
		{[]string{"h2c, websocket"}, "websocket"},
		{[]string{"H2C", "websocket"}, "websocket"},
	} {
		h := http.Header{"Upgrade": tc.upgrade, "Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"}}
		forward.DropH2CUpgrade(h)
		if got := h.Get("Upgrade"); got != tc.want {
			t.Errorf("Upgrade %q: %q left, want %q", tc.upgrade, got, tc.want)
		}
		if tc.want == "websocket" && len(tc.upgrade) == 1 && tc.upgrade[0] == "websocket" {
			if h.Get("Http2-Settings") == "" {
				t.Errorf("Upgrade %q: HTTP2-Settings removed from a request that offered no h2c", tc.upgrade)
			}
		} else if h.Get("Http2-Settings") != "" {
			t.Errorf("Upgrade %q: HTTP2-Settings kept", tc.upgrade)
		}
	}
}

package proxy

import (
	"bufio"
	"fmt"
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

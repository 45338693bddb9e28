package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
)

// A listener a reload turns into a tcp listener, on the same address, is
// handed its connections at once: the socket it keeps was bound for a
// protocol whose client speaks first, with deferred accept, and a
// service that speaks first (SMTP, MySQL) would otherwise greet only
// once timeouts.handshake had passed.
func TestReloadToTCPHandsOverAtOnce(t *testing.T) {
	greeter := testnet.Serve(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "220 ready\r\n")
		_, _ = io.Copy(io.Discard, c)
	})
	addr := "127.0.0.1:" + strconv.Itoa(testnet.FreePort(t))
	doc := func(protocol, target string) string {
		return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
timeouts: {handshake: 5s}
listeners:
  - name: app
    listen: %q
    protocol: %s
    routes: [{upstream: svc}]
upstreams:
  svc:
    targets: [%q]
    health: {disabled: true}
`, addr, protocol, target)
	}
	gw := startServer(t, parseConfig(t, doc("http", "http://127.0.0.1:1")), nil)
	if err := gw.Reload(parseConfig(t, doc("tcp", "tcp://"+greeter))); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "220 ready\r\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the greeting came after %v: the connection waited for deferred accept", d.Round(time.Millisecond))
	}

	// Back to http: a client that connects and says nothing is not
	// handed over again.
	c.Close()
	testwait.For(t, "the forwarded connection to end", func() bool { return gw.activeConns("app") == 0 })
	if err := gw.Reload(parseConfig(t, doc("http", "http://127.0.0.1:1"))); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Nothing is to happen: the passing of time is what is tested.
	time.Sleep(200 * time.Millisecond)
	if n := gw.activeConns("app"); n != 0 {
		t.Fatalf("%d connections handed over with only a silent client", n)
	}
}

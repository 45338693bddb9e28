package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// h2cClient speaks HTTP/2 with prior knowledge over plain TCP (h2c).
func h2cClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: &http.Protocols{}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// refusedAsHTTP1 reports whether the server answered a preface it
// refused: a 400 in HTTP/1.1, then the connection closed.
func refusedAsHTTP1(answer []byte) bool {
	return strings.HasPrefix(string(answer), "HTTP/1.1 400 ")
}

// sendFragmentedPreface sends the HTTP/2 preface on conn in two writes,
// its first two bytes apart from the rest, with an empty SETTINGS frame,
// and returns what the server answers until it closes the connection
// (or until it has sent a frame's header).
func sendFragmentedPreface(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, edge.HTTP2Preface[:2]); err != nil {
		t.Fatal(err)
	}
	// Give the server the chance to read the two bytes on their own.
	time.Sleep(50 * time.Millisecond)
	if _, err := io.WriteString(conn, edge.HTTP2Preface[2:]+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || isHTTP2Frame(got) {
			return got
		}
	}
}

// isHTTP2Frame reports whether b starts with the header of a SETTINGS
// frame, the first thing an HTTP/2 server sends.
func isHTTP2Frame(b []byte) bool {
	return len(b) >= 9 && b[3] == 0x4 && !strings.HasPrefix(string(b), "HTTP/")
}

// HTTP/2 is decided for each connection: a connection that may not speak
// it is refused when it starts with the preface, however its bytes are
// split into reads.
func TestHTTP2PrefaceRefusedWhenNotChosen(t *testing.T) {
	p := getPKI(t)
	cfg := testConfig(p, echoUpstream(t, "a").URL)
	cfg.Listeners = append(cfg.Listeners, config.Listener{Name: "local", Listen: "127.0.0.1:0", Protocol: config.ProtocolHTTP,
		Routes: []config.Route{{Upstream: "app", Path: "/"}}})
	s := startServer(t, cfg, nil)

	if resp, err := h2cClient(t).Get("http://" + s.Addr("local").String() + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("h2c prior knowledge on an http listener: %s", resp.Proto)
	}
	plain, err := net.Dial("tcp", s.Addr("local").String())
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, plain); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface on an http listener was answered %q, want a 400 in HTTP/1.1", got)
	}
	// A TLCP client that chose http/1.1 by ALPN.
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, conn); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface on a TLCP connection that chose http/1.1 was answered %q, want a 400 in HTTP/1.1", got)
	}
	// One that chose nothing may, however it sends the preface.
	conn, err = tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, conn); !isHTTP2Frame(got) {
		t.Errorf("a fragmented preface on a TLCP connection that may speak HTTP/2: %q, want a SETTINGS frame", got)
	}
}

// A reload that changes a kept listener's protocol changes whether its
// connections may speak HTTP/2.
func TestReloadChangesListenerProtocolHTTP2(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	tlcpCfg := testConfig(p, up.URL)
	tlcpCfg.Listeners[0].Protocol = config.ProtocolTLCP
	tlcpCfg.Listeners[0].TLS = nil
	httpCfg := testConfig(p, up.URL)
	httpCfg.Listeners[0].Protocol = config.ProtocolHTTP
	httpCfg.Listeners[0].TLCP = nil
	httpCfg.Listeners[0].TLS = nil
	httpCfg.Listeners[0].HTTP2 = nil

	s := startServer(t, httpCfg, nil)
	addr := s.Addr("edge").String()
	if err := s.Reload(tlcpCfg); err != nil {
		t.Fatal(err)
	}
	if s.Addr("edge").String() != addr {
		t.Fatalf("the reload moved the listener from %s to %s", addr, s.Addr("edge"))
	}
	client, negotiated := h2TLCPClient(t, p, []string{"h2", "http/1.1"})
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("HTTP/2 over TLCP after a reload from http to tlcp: %v (connections chose %q)", err, negotiated())
	}
	readAll(t, resp)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusCreated {
		t.Errorf("after a reload from http to tlcp: %s %s", resp.Proto, resp.Status)
	}

	if err := s.Reload(httpCfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	if resp, err := h2cClient(t).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("h2c prior knowledge after a reload from tlcp to http: %s", resp.Proto)
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("h2c prior knowledge after a reload from tlcp to http: %v, want the connection refused at once", err)
	}
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, plain); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface after a reload from tlcp to http was answered %q, want a 400 in HTTP/1.1", got)
	}
	if resp, _ := get(t, http.DefaultClient, "http://"+addr+"/"); resp.StatusCode != http.StatusCreated {
		t.Errorf("HTTP/1.1 after a reload from tlcp to http: %s", resp.Status)
	}
}

// A connection that spoke HTTP/1.1 and was parked while idle goes back to
// the HTTP server as a new connection; it may not start HTTP/2 then,
// though its handshake would have let it start with it.
func TestParkedHTTP1ConnectionStaysHTTP1(t *testing.T) {
	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "app").URL), nil)
	c := dialRaw(t, p, s, "tlcp")
	c.get(getRequest, 1)
	testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
	if got := sendFragmentedPreface(t, c.conn); !refusedAsHTTP1(got) {
		t.Errorf("the preface on a parked HTTP/1.1 connection was answered %q, want a 400 in HTTP/1.1", got)
	}
}

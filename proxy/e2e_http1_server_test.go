package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// One keep-alive HTTP/1.1 connection carries requests of both HTTP
// servers of a listener: its GETs are served by the gateway's own
// (h1server) until a request with a body comes, which goes, with what
// follows it on the connection, to net/http's. Over TLCP and TLS, one
// request at a time and pipelined, every request reaches the upstream
// once and every response comes back in order.
func TestHTTP1ConnectionMixesServers(t *testing.T) {
	var upstreamRequests atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamRequests.Add(1)
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(b))
	}))
	defer up.Close()
	p := getPKI(t)
	s := startServer(t, testConfig(p, up.URL), nil)
	addr := s.Addr("edge").String()

	dials := map[string]func() (net.Conn, error){
		"tlcp": func() (net.Conn, error) {
			return tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"tls": func() (net.Conn, error) {
			return tls.Dial("tcp", addr, &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		},
	}
	for name, dial := range dials {
		t.Run(name, func(t *testing.T) {
			upstreamRequests.Store(0)
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			get := func(path string) string {
				return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n"
			}
			post := func(path, body string) string {
				return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
					strconv.Itoa(len(body)) + "\r\n\r\n" + body
			}
			expect := func(want ...string) {
				t.Helper()
				for _, w := range want {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("waiting for %q: %v", w, err)
					}
					b, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusOK || string(b) != w {
						t.Fatalf("got %d %q, want %q", resp.StatusCode, b, w)
					}
				}
			}
			for _, step := range []struct {
				send string
				want []string
			}{
				{get("/a?x=1"), []string{"GET /a?x=1 "}},
				{get("/b"), []string{"GET /b "}},
				{post("/c", "hello"), []string{"POST /c hello"}},
				{get("/d"), []string{"GET /d "}},
				{get("/e") + post("/f", "pipelined") + get("/g"), []string{"GET /e ", "POST /f pipelined", "GET /g "}},
			} {
				if _, err := io.WriteString(c, step.send); err != nil {
					t.Fatal(err)
				}
				expect(step.want...)
			}
			if n := upstreamRequests.Load(); n != 7 {
				t.Fatalf("the upstream saw %d requests, want 7", n)
			}
		})
	}
}

package proxy

// A client identity rotated while requests keep coming: the partner sees
// the new certificate from the next request on, over new connections,
// and the connections made with the old one close once the requests they
// carry are done.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
)

// certPartner is a TLCP server that requires a client certificate from
// the test CA and answers every request, in HTTP/1.1 or (when its ALPN
// chose h2) HTTP/2, with the common name of the certificate its
// connection was made with. A request for /slow is held until release
// is closed; a WebSocket upgrade answers each line with that name and
// the line.
type certPartner struct {
	addr    string
	arrived chan struct{} // closed when /slow arrived
	release chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]*partnerConn
}

type partnerConn struct {
	cn     string
	closed bool
}

type partnerConnKey struct{}

func newCertPartner(t *testing.T, p *testPKI, alpn string) *certPartner {
	t.Helper()
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{*cert}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: p.roots}
	if alpn != "" {
		cfg.NextProtos = []string{alpn}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp := &certPartner{addr: ln.Addr().String(), arrived: make(chan struct{}), release: make(chan struct{}), conns: map[net.Conn]*partnerConn{}}
	var slow atomic.Bool
	protocols := &http.Protocols{}
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: protocols,
		ErrorLog:  log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, partnerConnKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			switch st {
			case http.StateNew:
				cp.conns[c] = &partnerConn{}
			case http.StateClosed:
				cp.conns[c].closed = true
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			c := r.Context().Value(partnerConnKey{}).(net.Conn)
			cn := c.(*tlcp.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
			cp.mu.Lock()
			cp.conns[c].cn = cn
			cp.mu.Unlock()
			if r.Header.Get("Upgrade") == "websocket" {
				ws, brw := switchToWebSocket(w)
				if ws == nil {
					return
				}
				for {
					line, err := brw.ReadString('\n')
					if err != nil {
						break
					}
					fmt.Fprintf(brw, "%s: %s", cn, line)
					brw.Flush()
				}
				ws.Close()
				cp.mu.Lock()
				cp.conns[c].closed = true
				cp.mu.Unlock()
				return
			}
			if r.URL.Path == "/slow" && slow.CompareAndSwap(false, true) {
				close(cp.arrived)
				<-cp.release
			}
			fmt.Fprint(w, cn)
		}),
	}
	go srv.Serve(tlcp.NewListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return cp
}

// open counts the connections still open that presented cn.
func (cp *certPartner) open(cn string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	n := 0
	for _, c := range cp.conns {
		if c.cn == cn && !c.closed {
			n++
		}
	}
	return n
}

// TestOutboundRotationMovesConnections: while requests keep coming (one
// of them held at the partner), the client certificate is rotated by a
// reload or by the certificate watcher. Every request sent after the
// rotation presents the new certificate, over HTTP/1.1 keep-alive and
// over one shared HTTP/2 connection alike; no request fails, the held
// one included, nor a WebSocket upgraded before the rotation; and the
// connections made with the old certificate close once the held request
// is done, the upgraded one when it ends.
func TestOutboundRotationMovesConnections(t *testing.T) {
	p := getPKI(t)
	first, _ := clientIdentityFor(t, p, "app-2025")
	second, _ := clientIdentityFor(t, p, "app-2026")
	for _, tc := range []struct {
		name, alpn, extra string
		// watcher rotates by the watcher; otherwise a reload does, of
		// the same files, or with otherFiles of a configuration that
		// names the new certificate's files (a new pool).
		watcher, otherFiles bool
	}{
		{"http1 reload", "", "", false, false},
		{"http2 reload", "h2", "http2: true", false, false},
		{"http1 watcher", "", "", true, false},
		{"http2 watcher", "h2", "http2: true", true, false},
		{"http1 reload to other files", "", "", false, true},
		{"http2 reload to other files", "h2", "http2: true", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := pki.DualFileNames(tempDir(t), "client")
			install := func(from pki.DualFiles) {
				for _, f := range [][2]string{{from.SignKey, live.SignKey}, {from.EncKey, live.EncKey}, {from.SignCert, live.SignCert}, {from.EncCert, live.EncCert}} {
					data, err := os.ReadFile(f[0])
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(f[1], data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			install(first)
			partner := newCertPartner(t, p, tc.alpn)
			config := func(id pki.DualFiles) string {
				return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tlcp://%s"]
    health: {disabled: true}
%s
    tlcp:
%s
`, partner.addr, indent(tc.extra, "    "), indent(identitySection(p, id, "ECC_SM4_GCM_SM3"), "      "))
			}
			doc := config(live)
			gw := startServer(t, parseConfig(t, doc), nil)
			url := "http://" + gw.Addr("app").String()
			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			t.Cleanup(client.CloseIdleConnections)
			send := func(method, path string) (string, error) {
				var body io.Reader
				if method == http.MethodPost {
					body = strings.NewReader("payload")
				}
				req, _ := http.NewRequest(method, url+path, body)
				resp, err := client.Do(req)
				if err != nil {
					return "", err
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					return "", fmt.Errorf("%s %s: %d %q (%v)", method, path, resp.StatusCode, got, err)
				}
				return string(got), nil
			}

			held := make(chan string, 1)
			go func() {
				cn, err := send(http.MethodGet, "/slow")
				if err != nil {
					cn = err.Error()
				}
				held <- cn
			}()
			select {
			case <-partner.arrived:
			case s := <-held:
				t.Fatalf("the held request ended early: %s", s)
			}
			var ws net.Conn
			var wsr *bufio.Reader
			echo := func(line string) string {
				t.Helper()
				fmt.Fprintf(ws, "%s\n", line)
				got, err := wsr.ReadString('\n')
				if err != nil {
					t.Fatalf("the upgraded connection: %v", err)
				}
				return strings.TrimSpace(got)
			}
			if tc.alpn == "" {
				// HTTP/2 has no upgrade: only over HTTP/1.1.
				var err error
				if ws, err = net.Dial("tcp", gw.Addr("app").String()); err != nil {
					t.Fatal(err)
				}
				defer ws.Close()
				_ = ws.SetDeadline(time.Now().Add(20 * time.Second))
				fmt.Fprint(ws, "GET /ws HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				wsr = bufio.NewReader(ws)
				resp, err := http.ReadResponse(wsr, nil)
				if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("upgrade: %v %v", resp, err)
				}
				if got := echo("before"); got != "app-2025: before" {
					t.Fatalf("upgraded connection: %q", got)
				}
			}

			// Workers send requests until stopped, each noting whether
			// it started after the rotation.
			type result struct {
				after bool
				cn    string
				err   error
			}
			var rotated, stop atomic.Bool
			var mu sync.Mutex
			var results []result
			counted := func(after bool) int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, r := range results {
					if r.after == after {
						n++
					}
				}
				return n
			}
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						after := rotated.Load()
						method := http.MethodGet
						if (w+i)%2 == 1 {
							method = http.MethodPost
						}
						cn, err := send(method, fmt.Sprintf("/w%d/%d", w, i))
						mu.Lock()
						results = append(results, result{after, cn, err})
						mu.Unlock()
					}
				})
			}
			testwait.For(t, "requests before the rotation", func() bool { return counted(false) >= 40 })

			if tc.otherFiles {
				doc = config(second)
			} else {
				install(second)
			}
			if tc.watcher {
				testwait.For(t, "the watcher to load the new certificate", func() bool {
					c := gw.current().store.TLCPCertificate(upstream.Source("partner"))
					return c != nil && c.SignLeaf.Subject.CommonName == "app-2026"
				})
			} else if err := gw.Reload(parseConfig(t, doc)); err != nil {
				t.Fatal(err)
			}
			rotated.Store(true)
			testwait.For(t, "requests after the rotation", func() bool { return counted(true) >= 40 })

			close(partner.release)
			if cn := <-held; cn != "app-2025" {
				t.Errorf("the request held over the rotation: %q, want app-2025", cn)
			}
			stop.Store(true)
			wg.Wait()
			bad := 0
			for _, r := range results {
				switch {
				case r.err != nil:
					t.Errorf("a request failed: %v", r.err)
					bad++
				case r.after && r.cn != "app-2026":
					t.Errorf("a request sent after the rotation presented %q", r.cn)
					bad++
				}
				if bad > 5 {
					t.FailNow()
				}
			}
			if ws != nil {
				testwait.For(t, "the idle connections made with the old certificate to close", func() bool { return partner.open("app-2025") == 1 })
				if got := echo("after"); got != "app-2025: after" {
					t.Fatalf("the upgraded connection after the rotation: %q", got)
				}
				ws.Close()
			}
			testwait.For(t, "the connections made with the old certificate to close", func() bool { return partner.open("app-2025") == 0 })
			if partner.open("app-2026") == 0 {
				t.Error("no connection with the new certificate is open")
			}
		})
	}
}

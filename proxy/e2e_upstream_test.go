package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// TestUpstreamHost: an upstream's host sets the Host header (HTTP/2:
// :authority) that its targets get, on every scheme that speaks HTTP,
// for requests with and without a body and for health checks; left out,
// the client's Host goes through. X-Forwarded-Host is the client's Host
// either way.
func TestUpstreamHost(t *testing.T) {
	p := getPKI(t)
	var checkHost atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == "gmgate-health-check" {
			checkHost.Store(r.Host)
			return
		}
		fmt.Fprintf(w, "%s %s %s", r.Host, r.Header.Get("X-Forwarded-Host"), r.Proto)
	})
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	h2cAddr := h2cUpstream(t, h)
	partner, _ := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return "h2" }, h)
	partnerH1, _ := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return "" }, h)
	plainAddr := strings.TrimPrefix(plain.URL, "http://")
	tlcpSection := "tlcp: {ca: " + p.dual.CACert + ", server_name: localhost}"

	for _, tc := range []struct {
		name, target, settings, want, proto string
	}{
		{"http passes the client's", "http://" + plainAddr, "", "app.example.cn", "HTTP/1.1"},
		{"http target", "http://" + plainAddr, "host: target", plainAddr, "HTTP/1.1"},
		{"http literal", "http://" + plainAddr, "host: api.partner.cn", "api.partner.cn", "HTTP/1.1"},
		{"h2c target", "h2c://" + h2cAddr, "host: target", h2cAddr, "HTTP/2.0"},
		{"tlcp http2 target", "tlcp://" + partner, "host: target\nhttp2: true\n" + tlcpSection, partner, "HTTP/2.0"},
		{"tlcp literal with port", "tlcp://" + partnerH1, "host: \"api.partner.cn:8443\"\n" + tlcpSection, "api.partner.cn:8443", "HTTP/1.1"},
		{"tlcp passes the client's", "tlcp://" + partnerH1, tlcpSection, "app.example.cn", "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkHost.Store("")
			gw := startServer(t, parseConfig(t, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: [%q]
    health: {path: /healthz, interval: 50ms}
%s
`, tc.target, indent(tc.settings, "    "))), nil)
			client := &http.Client{Timeout: 20 * time.Second}
			want := tc.want + " app.example.cn " + tc.proto
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				var body io.Reader
				if method == http.MethodPost {
					// Over net/http's transport; the GET over gmgate's own.
					body = strings.NewReader("payload")
				}
				req, _ := http.NewRequest(method, "http://"+gw.Addr("app").String()+"/x", body)
				req.Host = "app.example.cn"
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != want {
					t.Errorf("%s: %d %q, want %q", method, resp.StatusCode, body, want)
				}
			}
			checked := tc.want
			if tc.settings == "" || tc.settings == tlcpSection {
				// No client, no client's Host: the target's as written.
				u, _ := url.Parse(tc.target)
				checked = u.Host
			}
			testwait.For(t, "a health check", func() bool { return checkHost.Load() != "" })
			if got := checkHost.Load(); got != checked {
				t.Errorf("health check Host %q, want %q", got, checked)
			}
		})
	}
}

// targetHost leaves out the port a target's scheme implies, as a client
// does in its Host header.
func TestTargetHost(t *testing.T) {
	for target, want := range map[string]string{
		"http://api.partner.cn:80":    "api.partner.cn",
		"http://api.partner.cn:443":   "api.partner.cn:443",
		"h2c://10.0.0.4:80":           "10.0.0.4",
		"https://api.partner.cn:443":  "api.partner.cn",
		"https://api.partner.cn":      "api.partner.cn",
		"tlcp://api.partner.cn":       "api.partner.cn",
		"tlcp://api.partner.cn:443":   "api.partner.cn",
		"tlcp://api.partner.cn:8443":  "api.partner.cn:8443",
		"tlcp://[2001:db8::1]:443":    "[2001:db8::1]",
		"http://[2001:db8::1]:8080":   "[2001:db8::1]:8080",
		"https://API.Partner.cn:8443": "API.Partner.cn:8443",
	} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := upstream.TargetHost(u); got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
}

// blackHoleRelay forwards TCP connections to a target until it is told
// to swallow them: from then on the connections it has carry nothing
// either way, and are not closed, as when the path to a host is cut
// without a word. Connections made later are forwarded again.
type blackHoleRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*relayedConn
}

type relayedConn struct {
	swallowed atomic.Bool
	// closedByClient is set when the client side of a swallowed
	// connection closed it.
	closedByClient atomic.Bool
}

func newBlackHoleRelay(t *testing.T, target string) *blackHoleRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &blackHoleRelay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go r.serve(t)
	return r
}

func (r *blackHoleRelay) serve(t *testing.T) {
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", r.target)
		if err != nil {
			client.Close()
			continue
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		rc := &relayedConn{}
		r.mu.Lock()
		r.conns = append(r.conns, rc)
		r.mu.Unlock()
		relay := func(dst, src net.Conn, fromClient bool) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if err != nil {
					if fromClient && rc.swallowed.Load() {
						rc.closedByClient.Store(true)
					}
					return
				}
				if rc.swallowed.Load() {
					continue
				}
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		go relay(server, client, true)
		go relay(client, server, false)
	}
}

// swallow makes the relay's connections so far carry nothing.
func (r *blackHoleRelay) swallow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.swallowed.Store(true)
	}
}

func (r *blackHoleRelay) connections() []*relayedConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*relayedConn(nil), r.conns...)
}

// shortUpstreamPings makes gmgate ping upstream HTTP/2 connections after
// after of silence, for the test.
func shortUpstreamPings(t *testing.T, after, timeout time.Duration) {
	pingAfter, pingTimeout := upstream.PingAfter, upstream.PingTimeout
	upstream.PingAfter, upstream.PingTimeout = after, timeout
	t.Cleanup(func() { upstream.PingAfter, upstream.PingTimeout = pingAfter, pingTimeout })
}

// An HTTP/2 connection to an upstream whose peer has gone silent is
// closed when it does not answer a PING, and the next request goes over
// a new one.
func TestUpstreamHTTP2PingClosesDeadConnection(t *testing.T) {
	shortUpstreamPings(t, 200*time.Millisecond, 500*time.Millisecond)
	p := getPKI(t)
	h2cAddr := h2cUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "app")
		_, _ = io.WriteString(w, r.Proto)
	}))
	relay := newBlackHoleRelay(t, h2cAddr)
	cfg := testConfig(p, "h2c://"+relay.ln.Addr().String())
	cfg.Upstreams["app"].Health.Disabled = true
	cfg.Timeouts.UpstreamResponse = config.Duration(5 * time.Second)
	s := startServer(t, cfg, nil)
	client := tlcpClient(t, p, nil)

	fetch := func(what string) {
		t.Helper()
		resp, body := get(t, client, gatewayURL(s, "/"))
		if resp.StatusCode != http.StatusOK || body != "HTTP/2.0" {
			t.Fatalf("%s: %s %q", what, resp.Status, body)
		}
	}
	fetch("first request")
	if n := len(relay.connections()); n != 1 {
		t.Fatalf("%d connections to the upstream, want 1", n)
	}
	relay.swallow()
	testwait.For(t, "gmgate to close the silent upstream connection", func() bool {
		return relay.connections()[0].closedByClient.Load()
	})
	fetch("request after the silent connection was closed")
	if n := len(relay.connections()); n != 2 {
		t.Errorf("%d connections to the upstream, want 2", n)
	}
}

// The PINGs keep within what a gRPC server allows: a stream that stays
// quiet for several PING intervals is not cut by a server that counts
// PINGs sooner than upstreamPingAfter after the previous one (gRPC's
// enforcement policy, its minimum scaled down here with the interval).
func TestUpstreamHTTP2PingsWithinGRPCPolicy(t *testing.T) {
	// gRPC servers' default minimum between PINGs on a connection with
	// streams.
	if upstream.PingAfter < 5*time.Minute {
		t.Fatalf("upstream PINGs after %v of silence; gRPC servers close connections pinged more often than every 5m", upstream.PingAfter)
	}
	const minTime = 300 * time.Millisecond
	shortUpstreamPings(t, minTime, 5*time.Second)
	p := getPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minTime}))
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	s := startServer(t, testConfig(p, "h2c://"+ln.Addr().String()), nil)

	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		d := &tlcp.Dialer{Config: &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"h2"}}}
		return d.DialContext(ctx, "tcp", addr)
	}
	cc, err := grpc.NewClient("passthrough:///"+s.Addr("edge").String(), grpc.WithContextDialer(dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := watch.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status: %v, %v", st, err)
	}
	// The stream stays quiet for over 5 PING intervals: a server that
	// minded the PINGs closes the connection after its third.
	time.Sleep(6 * minTime)
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING)
	if st, err := watch.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("status after a quiet stream: %v, %v", st, err)
	}
}

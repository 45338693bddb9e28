package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// Through gmgate: one HTTP/2 client connection that opens many slow
// requests to a target gets half of max_conns_per_target, and another
// client's request goes through at once.
func TestHTTP2ClientConnectionFairShare(t *testing.T) {
	p := getPKI(t)
	release := make(chan struct{})
	defer close(release)
	var held atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		defer held.Add(-1)
		if r.URL.Path == "/quick" {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	maxConns, queue := 4, 16
	app := cfg.Upstreams["app"]
	app.MaxConnsPerTarget, app.QueueSize = &maxConns, &queue
	s := startServer(t, cfg, nil)

	c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slowStreams(c, 8, func(int) {}) }()
	defer wg.Wait()
	defer c.Close()
	testwait.For(t, "the HTTP/2 connection's requests to take their share and wait", func() bool {
		v, _ := metricValue(scrape(t, s), "gmgate_upstream_requests_waiting", nil)
		return held.Load() == int64(maxConns/2) && v == 6
	})
	if resp, _ := get(t, tlcpClient(t, p, nil), gatewayURL(s, "/quick")); resp.StatusCode != http.StatusOK {
		t.Errorf("another client's request while one HTTP/2 connection waits for more: %d", resp.StatusCode)
	}
	if n := held.Load(); n != int64(maxConns/2) {
		t.Errorf("the HTTP/2 connection holds %d of %d connections", n, maxConns)
	}
}

// max_conns_per_target holds for every scheme an HTTP route reaches: a
// target of two takes two slow requests, and a third, with no queue, is
// answered 503 at once; over HTTP/2 the two are streams.
func TestTargetCapEveryScheme(t *testing.T) {
	p := getPKI(t)
	for _, tc := range []struct {
		name  string
		start func(h http.Handler) (target string, tune func(*config.Upstream))
	}{
		{"http", func(h http.Handler) (string, func(*config.Upstream)) {
			up := httptest.NewServer(h)
			t.Cleanup(up.Close)
			return up.URL, nil
		}},
		{"h2c", func(h http.Handler) (string, func(*config.Upstream)) {
			return "h2c://" + h2cUpstream(t, h), nil
		}},
		{"https", func(h http.Handler) (string, func(*config.Upstream)) {
			up := httptest.NewTLSServer(h)
			t.Cleanup(up.Close)
			return up.URL, func(u *config.Upstream) { u.TLS = &config.UpstreamTLS{InsecureSkipVerify: true} }
		}},
		{"https http2", func(h http.Handler) (string, func(*config.Upstream)) {
			up := httptest.NewUnstartedServer(h)
			up.EnableHTTP2 = true
			up.StartTLS()
			t.Cleanup(up.Close)
			return up.URL, func(u *config.Upstream) {
				u.TLS = &config.UpstreamTLS{InsecureSkipVerify: true}
				u.HTTP2 = true
			}
		}},
		{"tlcp", func(h http.Handler) (string, func(*config.Upstream)) {
			addr, _ := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return "" }, h)
			return "tlcp://" + addr, func(u *config.Upstream) { u.TLCP = &config.UpstreamTLCP{InsecureSkipVerify: true} }
		}},
		{"tlcp http2", func(h http.Handler) (string, func(*config.Upstream)) {
			addr, _ := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return "h2" }, h)
			return "tlcp://" + addr, func(u *config.Upstream) {
				u.TLCP = &config.UpstreamTLCP{InsecureSkipVerify: true}
				u.HTTP2 = true
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var held atomic.Int64
			var proto atomic.Int64
			target, tune := tc.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				held.Add(1)
				defer held.Add(-1)
				proto.Store(int64(r.ProtoMajor))
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			cfg := testConfig(p, target)
			maxConns, queue := 2, 0
			app := cfg.Upstreams["app"]
			app.MaxConnsPerTarget, app.QueueSize = &maxConns, &queue
			app.Health.Disabled = true
			if tune != nil {
				tune(app)
			}
			config.Defaults(cfg)
			s := startServer(t, cfg, nil)
			client := tlcpClient(t, p, nil)
			results := make(chan int, maxConns)
			for range maxConns {
				go func() {
					resp, err := client.Get(gatewayURL(s, "/slow"))
					if err != nil {
						results <- 0
						return
					}
					resp.Body.Close()
					results <- resp.StatusCode
				}()
			}
			testwait.For(t, "the target's two connections to be in use", func() bool { return held.Load() == int64(maxConns) })
			if resp, body := get(t, client, gatewayURL(s, "/slow")); resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("a third request: %d %q, want 503", resp.StatusCode, body)
			}
			if v, _ := metricValue(scrape(t, s), "gmgate_upstream_requests_refused_total", map[string]string{"reason": "queue_full"}); v != 1 {
				t.Errorf("requests refused for a full queue: %v, want 1", v)
			}
			close(release)
			for range maxConns {
				if code := <-results; code != http.StatusOK {
					t.Errorf("a held request: %d, want 200", code)
				}
			}
			t.Logf("the target spoke HTTP/%d", proto.Load())
		})
	}
}

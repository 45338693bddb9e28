package route

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/upstream"
)

func TestRouterPrecedence(t *testing.T) {
	pools := map[string]*upstream.Pool{}
	for _, n := range []string{"any", "api", "apiv2", "wild", "tcpdb", "tcpany"} {
		scheme := "http"
		if strings.HasPrefix(n, "tcp") {
			scheme = "tcp"
		}
		pools[n] = &upstream.Pool{Name: n, Scheme: scheme}
	}
	r := &Router{Routes: []RouteEntry{
		{Host: "", Path: "/", Upstream: pools["any"]},
		{Host: "api.example.cn", Path: "/", Upstream: pools["api"]},
		{Host: "api.example.cn", Path: "/v2/", Upstream: pools["apiv2"]},
		{Host: "*.example.cn", Path: "/", Upstream: pools["wild"]},
		{Host: "db.example.cn", Upstream: pools["tcpdb"], Stream: true},
		{Host: "", Upstream: pools["tcpany"], Stream: true},
	}}
	cases := []struct {
		host, path string
		tcp        bool
		want       string
	}{
		{"api.example.cn", "/v1/x", false, "api"},
		{"API.Example.CN:443", "/v2/x", false, "apiv2"},
		{"www.example.cn", "/", false, "wild"},
		{"example.cn", "/", false, "any"},
		{"other.org", "/x", false, "any"},
		{"db.example.cn", "", true, "tcpdb"},
		{"", "", true, "tcpany"},
	}
	for _, c := range cases {
		h, ok := hostname.ParseAuthority(c.host)
		if !ok && c.host != "" {
			t.Fatalf("%q is not a host", c.host)
		}
		got := r.Match(h.Name, c.path, c.tcp)
		if got == nil || got.Upstream.Name != c.want {
			t.Errorf("match(%q, %q, tcp=%v) = %v, want %s", c.host, c.path, c.tcp, got, c.want)
		}
	}
	if got := (&Router{}).Match("x", "/", false); got != nil {
		t.Errorf("empty router matched %v", got)
	}
	// Every connection asks for its TCP route by server name, and every
	// request for its route by Host, mostly without a port.
	for _, host := range []string{"", "api.example.cn", "api.example.cn:443"} {
		if n := testing.AllocsPerRun(100, func() {
			h, _ := hostname.ParseAuthority(host)
			r.Match(h.Name, "/v1/x", host == "")
		}); n != 0 {
			t.Errorf("match(%q) allocates %v times", host, n)
		}
	}
}

func TestPolicies(t *testing.T) {
	targets := []*upstream.Target{{Addr: "a"}, {Addr: "b"}, {Addr: "c"}}
	rr := &upstream.RoundRobin{}
	seen := map[string]int{}
	for range 6 {
		seen[rr.Pick(targets).Addr]++
	}
	if seen["a"] != 2 || seen["b"] != 2 || seen["c"] != 2 {
		t.Errorf("round robin: %v", seen)
	}
	lc := &upstream.LeastConn{}
	targets[0].Inflight.Store(3)
	targets[1].Inflight.Store(1)
	targets[2].Inflight.Store(2)
	for range 5 {
		if got := lc.Pick(targets).Addr; got != "b" {
			t.Fatalf("least_conn picked %s", got)
		}
	}
	if rr.Pick(nil) != nil || lc.Pick(nil) != nil {
		t.Error("a policy picked from nothing")
	}
}

func TestRetryable(t *testing.T) {
	for method, want := range map[string]bool{"GET": true, "HEAD": true, "PUT": true, "DELETE": true, "OPTIONS": true, "POST": false, "PATCH": false} {
		r := httptest.NewRequest(method, "/", nil)
		if got := upstream.Retryable(r); got != want {
			t.Errorf("retryable(%s) = %v, want %v", method, got, want)
		}
	}
	r := httptest.NewRequest("PUT", "/", strings.NewReader("body"))
	r.GetBody = nil
	if upstream.Retryable(r) {
		t.Error("a PUT whose body cannot be replayed is retryable")
	}
}

func TestClassifyUpstreamError(t *testing.T) {
	if s, _ := forward.ClassifyUpstreamError(&upstream.Error{Pool: "x", Err: upstream.ErrNoTarget}); s != 503 {
		t.Errorf("no target: %d", s)
	}
}

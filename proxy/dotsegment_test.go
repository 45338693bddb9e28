package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
)

// TestDotSegmentsDoNotEscapeRoutes: a route's path prefix is matched on
// the path the request names, and an upstream that resolves dot
// segments (as Tomcat, and most servers behind a gateway, do; Tomcat
// also drops ";..." from a segment) must not be reached at a path
// outside the prefix through "/public/../internal". Such paths, which no
// browser or HTTP library sends unresolved, are refused with 400.
func TestDotSegmentsDoNotEscapeRoutes(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(r.URL.Path, "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		fmt.Fprintf(w, "served %s", path.Clean(strings.Join(segs, "/")))
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].Routes = []config.Route{{Path: "/public/", Upstream: "app"}}
	s := startServer(t, cfg, nil)

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/public/page", http.StatusOK},
		{"/public/.well-known/x", http.StatusOK},
		{"/public/a..b/c", http.StatusOK},
		{"/public/../internal", http.StatusBadRequest},
		{"/public/./../internal", http.StatusBadRequest},
		{"/public/%2e%2e/internal", http.StatusBadRequest},
		{"/public/%2E%2E%2Finternal", http.StatusBadRequest},
		{"/public/..;/internal", http.StatusBadRequest},
		{"/public/..", http.StatusBadRequest},
		{"/public/.", http.StatusBadRequest},
		{`/public\..\internal`, http.StatusBadRequest},
	} {
		c := dialTLCP(t, p, s)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", tc.path)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d %q, want %d", tc.path, resp.StatusCode, body, tc.status)
		}
		if tc.status == http.StatusBadRequest && !strings.Contains(string(body), "segment") {
			t.Errorf("GET %s: refused for another reason: %q", tc.path, body)
		}
	}
}

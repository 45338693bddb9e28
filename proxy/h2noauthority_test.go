package proxy

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestHTTP2RequestWithoutAuthority: an HTTP/2 request for an https URL
// that names its host neither in :authority nor in Host is malformed (RFC
// 9113 §8.3.1) and answered 400, as net/http answers an HTTP/1.1 request
// without Host; it reached the upstream with the target's address as its
// Host. A Host header without :authority names the host.
func TestHTTP2RequestWithoutAuthority(t *testing.T) {
	p := getPKI(t)
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	if got := h2Status(t, p, s, ":method", "GET", ":scheme", "https", ":path", "/"); got != "400" {
		t.Errorf("neither :authority nor Host: status %q, want 400", got)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests without a host reached the upstream", n)
	}
	if got := h2Status(t, p, s, ":method", "GET", ":scheme", "https", ":path", "/", "host", "localhost"); got != "200" {
		t.Errorf("Host without :authority: status %q, want 200", got)
	}
}

package proxy

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// TestHTTP2HostMustMatchAuthority: an HTTP/2 request whose Host header
// names another host than its :authority (or that has two Host headers)
// is malformed (RFC 9113 §8.3.1) and answered 400, over TLS and TLCP, as
// nginx answers it, rather than served by :authority while the upstream
// could read the other name. The same host in another case or with a
// trailing dot is the same host.
func TestHTTP2HostMustMatchAuthority(t *testing.T) {
	p := getPKI(t)
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	over := map[string]func(fields ...string) string{
		"tls": func(fields ...string) string { return h2Status(t, p, s, fields...) },
		"tlcp": func(fields ...string) string {
			c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"h2"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			status, _ := h2Exchange(t, c, fields...)
			return status
		},
	}
	request := func(authority string, hosts ...string) []string {
		f := []string{":method", "GET", ":scheme", "https", ":authority", authority, ":path", "/"}
		for _, h := range hosts {
			f = append(f, "host", h)
		}
		return f
	}
	for name, status := range over {
		for _, tc := range []struct {
			fields []string
			want   string
		}{
			{request("localhost", "evil.example"), "400"},
			{request("localhost", "localhost:8443"), "400"},
			{request("localhost", "localhost", "evil.example"), "400"},
			{request("localhost", "bad host"), "400"},
			{request("localhost", "LOCALHOST."), "200"},
			{request("localhost:443", "localhost:443"), "200"},
			{request("localhost"), "200"},
		} {
			before := reached.Load()
			if got := status(tc.fields...); got != tc.want {
				t.Errorf("%s: %q: status %q, want %s", name, tc.fields[4:], got, tc.want)
			}
			if served := reached.Load() != before; served != (tc.want == "200") {
				t.Errorf("%s: %q: reached the upstream: %v", name, tc.fields[4:], served)
			}
		}
	}
}

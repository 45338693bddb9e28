package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
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

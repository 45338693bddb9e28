package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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

// hostForms are Host headers, :authority values and server names in every
// malformed form at hand, with well-formed ones of the same names.
var hostForms = []string{
	"", "pay.test", "PAY.TEST", "pay.test.", "Pay.Test.:443", "pay.test:443", "www.pay.test", "WWW.pay.TEST.:8443",
	"open.test", "open.test:443", "other.test", "10.0.0.1", "10.0.0.1:443", "[::1]", "[::1]:443", "[::FFFF:10.0.0.1]:80",
	// Several colons, empty and odd ports.
	"pay.test:1:2", "pay.test::", "pay.test:80:", "pay.test:", "pay.test:0", "pay.test:65536", "pay.test:080",
	"pay.test:http", "pay.test:-1", "www.pay.test:1:2", ":443", ":",
	// Brackets, IPv6 literals.
	"[pay.test]", "[pay.test]:443", "[::1]:", "[::1]:1:2", "[::1", "::1", "::1]", "[]", "[fe80::1%25eth0]:443", "2001:db8::1",
	"[::1]pay.test", "pay.test]", "[pay.test",
	// Percent-encoding, userinfo, punctuation.
	"pay%2etest", "pay.test%3a443", "%70ay.test", "user@pay.test", "open.test@pay.test", "pay.test@open.test",
	"pay.test/x", "pay.test?x", "pay.test#x", "pay.test\\", "pay.test,open.test", "*.pay.test", "pay.tést",
	// Dots.
	"pay.test..", ".pay.test", "pay..test", ".", "..",
	// Whitespace and control characters.
	" pay.test", "pay.test ", "pay .test", "pay.test\t", "\tpay.test", "pay.test\x00", "pay.test\x00.open.test",
	"pay.test\r", "pay.test\n", "pay.test\x7f", "pay.test\xff",
	// Numbers read as other addresses.
	"127.1", "0x7f.0.0.1", "010.0.0.1", "2130706433", "pay.123",
}

// hostSelection is a listener like the review's: pay.test requires client
// certificates, open.test is the default, and the default site has a route
// that would take pay.test's requests (as a shared name-based upstream
// does): site selection and routing must read every name alike.
func hostSelection() (*route.SiteIndex, *route.Router) {
	pay := &route.Site{Name: "pay", Hosts: []string{"pay.test", "*.pay.test"}}
	open := &route.Site{Name: "open", Hosts: []string{"open.test"}, IsDefault: true}
	idx := route.NewSiteIndex([]*route.Site{pay, open}, func(*route.Site) bool { return true })
	r := &route.Router{}
	for _, h := range pay.Hosts {
		r.Routes = append(r.Routes, route.RouteEntry{Host: h, Path: "/", Upstream: &upstream.Pool{Name: "pay"}}, route.RouteEntry{Host: h, Upstream: &upstream.Pool{Name: "pay"}, Stream: true})
	}
	r.Routes = append(r.Routes, route.RouteEntry{Path: "/", Upstream: &upstream.Pool{Name: "open"}}, route.RouteEntry{Upstream: &upstream.Pool{Name: "open"}, Stream: true})
	return idx, r
}

// TestHostSelectionAgrees: every form of Host and :authority, and of an
// absolute-form target, gets the same answer from site selection and
// from routing (400 for both, or the same site), and every server name
// the same from the site a handshake gets and the stream route it takes.
func TestHostSelectionAgrees(t *testing.T) {
	idx, r := hostSelection()
	answer := func(s *route.Site, rt *route.RouteEntry) (bySite, byRoute string) {
		bySite, byRoute = "none", "none"
		if s != nil {
			bySite = s.Name
		}
		if rt != nil {
			byRoute = rt.Upstream.Name
		}
		return bySite, byRoute
	}
	for _, form := range hostForms {
		for _, proto := range []int{1, 2} {
			req := &http.Request{Host: form, ProtoMajor: proto}
			bySite, byRoute := "400", "400"
			if h, ok := route.RequestHost(req); ok {
				bySite, byRoute = answer(idx.Lookup(h.Name), r.Match(h.Name, "/x", false))
			}
			if bySite != byRoute {
				t.Errorf("HTTP/%d Host %q: site %s, route %s", proto, form, bySite, byRoute)
			}
			if strings.Contains(strings.ToLower(form), "pay.test") && bySite == "open" {
				t.Errorf("HTTP/%d Host %q reached the default site", proto, form)
			}
		}
		bySite, byRoute := "refused", "refused"
		if s := idx.LookupServerName(form); s != nil {
			name, _ := hostname.ParseServerName(form)
			bySite, byRoute = answer(s, r.Match(name, "", true))
		}
		if bySite != byRoute {
			t.Errorf("server name %q: site %s, stream route %s", form, bySite, byRoute)
		}
		if strings.Contains(strings.ToLower(form), "pay.test") && bySite == "open" {
			t.Errorf("server name %q reached the default site", form)
		}
	}
	// The absolute form: net/http takes the host of the target, not the
	// Host header.
	for _, target := range []string{"http://pay.test:1:2/", "http://pay.test::/", "http://pay.test:80:/", "https://PAY.test./",
		"http://user@pay.test/", "http://open.test/", "http://[::1]:443/", "http://pay.test%2e/"} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: open.test\r\n\r\n")))
		if err != nil {
			continue // net/http refuses it itself
		}
		bySite, byRoute := "400", "400"
		if h, ok := route.RequestHost(req); ok {
			bySite, byRoute = answer(idx.Lookup(h.Name), r.Match(h.Name, "/x", false))
		}
		if bySite != byRoute || strings.Contains(strings.ToLower(target), "pay.test") && bySite == "open" {
			t.Errorf("target %q (Host %q): site %s, route %s", target, req.Host, bySite, byRoute)
		}
	}
}

// BenchmarkHostSelection is what every request does with its host before
// it is forwarded: parse it, look up its site, match its route. A host in
// canonical form, with or without a port, costs no allocation.
func BenchmarkHostSelection(b *testing.B) {
	idx, r := hostSelection()
	for _, host := range []string{"pay.test", "pay.test:443", "www.pay.test", "open.test:8443", "Open.Test"} {
		b.Run(host, func(b *testing.B) {
			req := &http.Request{Host: host, ProtoMajor: 1}
			b.ReportAllocs()
			for b.Loop() {
				h, _ := route.RequestHost(req)
				idx.Lookup(h.Name)
				r.Match(h.Name, "/x", false)
			}
		})
	}
}

// vhostUpstream is a name-based upstream shared by two sites, as nginx
// with "server_name pay.test" is: it picks its virtual host by the Host
// header's name, up to a colon, without a trailing dot, in any case. It
// answers "pay vhost" or "open vhost", and records the Hosts it got.
type vhostUpstream struct {
	url   string
	mu    sync.Mutex
	hosts []string
}

func newVhostUpstream(t testing.TB) *vhostUpstream {
	u := &vhostUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hosts = append(u.hosts, r.Host)
		u.mu.Unlock()
		name := r.Host
		if i := strings.IndexByte(name, ':'); i >= 0 && !strings.HasPrefix(name, "[") {
			name = name[:i]
		}
		if strings.TrimSuffix(strings.ToLower(name), ".") == "pay.test" {
			fmt.Fprint(w, "pay vhost")
			return
		}
		fmt.Fprint(w, "open vhost")
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *vhostUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.hosts...)
}

// twoSiteGateway runs, from a configuration file read as gmgate serve
// reads it, a TLCP listener with HTTP/2 and two sites sharing the
// upstream: pay.test requires a verified client certificate, open.test is
// the default and requires none.
func twoSiteGateway(t *testing.T, upstream string) *Server {
	t.Helper()
	p := getPKI(t)
	dir := t.TempDir()
	files := map[string]pki.DualFiles{}
	for _, name := range []string{"pay", "open"} {
		pair, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{name + ".test"}})
		if err != nil {
			t.Fatal(err)
		}
		if files[name], err = pair.Write(dir, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	tlcpSection := func(f pki.DualFiles, extra string) string {
		return fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s%s}", f.SignCert, f.SignKey, f.EncCert, f.EncKey, extra)
	}
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tlcp
    http2: true
    sites:
      - name: pay
        hosts: [pay.test]
        tlcp: %s
        routes: [{upstream: vhosts}]
      - name: open
        hosts: [open.test]
        default: true
        tlcp: %s
        routes: [{upstream: vhosts}]
upstreams:
  vhosts: {targets: [%q]}
`, tlcpSection(files["pay"], ", client_auth: require_and_verify, client_ca: "+p.dual.CACert), tlcpSection(files["open"], ""), upstream)
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, cfg, nil)
}

// dialOpenSite makes a TLCP connection without a client certificate to
// the open site (SNI open.test), offering protos by ALPN.
func dialOpenSite(t *testing.T, s *Server, protos ...string) *tlcp.Conn {
	t.Helper()
	c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: getPKI(t).roots, ServerName: "open.test", NextProtos: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// h1Exchange sends a raw HTTP/1.1 request and returns the status and body
// of its response.
func h1Exchange(t *testing.T, c net.Conn, request string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// h2Exchange sends one HTTP/2 request with the given header fields on a
// new connection that chose h2, and returns its status and body.
func h2Exchange(t *testing.T, c net.Conn, fields ...string) (string, string) {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	status := ""
	var body bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%q: %v", fields, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				status = f.PseudoValue("status")
				if f.StreamEnded() {
					return status, body.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				body.Write(f.Data())
				if f.StreamEnded() {
					return status, body.String()
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "reset", body.String()
			}
		case *http2.GoAwayFrame:
			return "goaway", body.String()
		}
	}
}

// malformedPayHosts are forms of pay.test that are not a valid host:
// each must be refused, never reach the pay virtual host through the
// open site.
var malformedPayHosts = []string{"pay.test:1:2", "pay.test::", "pay.test:80:", "pay.test:", "PAY.TEST:1:2", "pay.test.:443:", "pay.test:0",
	"pay.test:http", "[pay.test]", "[pay.test]:443", "pay.test%3a443", "user@pay.test", "pay.test..", "pay .test", "pay.test\t:443"}

// TestMalformedHostRefused is item 1 of the second review: a client that
// passed the open site's handshake without a certificate sends requests
// whose Host (or :authority, or absolute-form target) is pay.test in a
// malformed form. Each is answered 400 before any site is looked up;
// the well-formed pay.test gets 421; none reaches the pay virtual host of
// the name-based upstream both sites share. The open site's own requests
// reach the upstream with their Host in canonical form.
func TestMalformedHostRefused(t *testing.T) {
	up := newVhostUpstream(t)
	s := twoSiteGateway(t, up.url)
	check := func(what string, status int, body string, want int) {
		t.Helper()
		if status != want || strings.Contains(body, "pay vhost") {
			t.Errorf("%s: %d %q, want %d", what, status, body, want)
		}
	}

	t.Run("HTTP/1.1", func(t *testing.T) {
		for _, host := range malformedPayHosts {
			c := dialOpenSite(t, s)
			status, body := h1Exchange(t, c, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
			check("Host "+host, status, body, http.StatusBadRequest)
		}
		for _, target := range []string{"http://pay.test:1:2/", "http://pay.test::/", "http://pay.test:80:/"} {
			c := dialOpenSite(t, s)
			status, body := h1Exchange(t, c, "GET "+target+" HTTP/1.1\r\nHost: open.test\r\n\r\n")
			check("target "+target, status, body, http.StatusBadRequest)
		}
		c := dialOpenSite(t, s)
		status, body := h1Exchange(t, c, "GET / HTTP/1.1\r\nHost: pay.test\r\n\r\n")
		check("Host pay.test", status, body, http.StatusMisdirectedRequest)
		status, body = h1Exchange(t, c, "GET / HTTP/1.1\r\nHost: OPEN.Test.:443\r\n\r\n")
		if status != http.StatusOK || body != "open vhost" {
			t.Errorf("Host OPEN.Test.:443: %d %q", status, body)
		}
	})

	t.Run("HTTP/2", func(t *testing.T) {
		for _, host := range malformedPayHosts {
			for _, fields := range [][]string{
				{":method", "GET", ":scheme", "https", ":authority", host, ":path", "/"},
				{":method", "GET", ":scheme", "https", ":path", "/", "host", host},
			} {
				c := dialOpenSite(t, s, "h2")
				status, body := h2Exchange(t, c, fields...)
				// Go's HTTP/2 server resets the stream of an
				// :authority with userinfo itself.
				if status != "400" && status != "reset" || strings.Contains(body, "pay vhost") {
					t.Errorf("%q: %s %q, want 400", fields, status, body)
				}
			}
		}
		c := dialOpenSite(t, s, "h2")
		if status, body := h2Exchange(t, c, ":method", "GET", ":scheme", "https", ":authority", "pay.test", ":path", "/"); status != "421" {
			t.Errorf(":authority pay.test: %s %q, want 421", status, body)
		}
		c = dialOpenSite(t, s, "h2")
		if status, body := h2Exchange(t, c, ":method", "GET", ":scheme", "https", ":authority", "Open.Test.", ":path", "/"); status != "200" || body != "open vhost" {
			t.Errorf(":authority Open.Test.: %s %q", status, body)
		}
	})

	// Only the open site's requests got through, with the host the
	// gateway looked up.
	if got := up.seen(); len(got) != 2 || got[0] != "open.test:443" || got[1] != "open.test" {
		t.Errorf("the upstream got Hosts %q, want [open.test:443 open.test]", got)
	}
}

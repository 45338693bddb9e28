package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/internal/upstream"
)

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

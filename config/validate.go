package config

// Validation of the whole schema lives in this one file, longer than the
// others, so that every rule and its message can be read in the order of
// the file's sections.

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/keyref"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// Validate checks a configuration built in code (Parse validates what it
// reads). Defaults must have been applied. All problems are reported in
// one *Error. It also sets the field paths of the listeners, sites and
// upstreams as they now are (Listener.Path).
func (c *Config) Validate() error {
	c.numberPaths()
	probs := validate(c, nil)
	if len(probs) == 0 {
		return nil
	}
	sortProblems(probs)
	return &Error{Problems: probs}
}

type validator struct {
	idx   *nodeIndex
	file  string
	probs []Problem
}

func (v *validator) add(path, msg, fix string) {
	v.probs = append(v.probs, Problem{File: v.file, Line: v.idx.line(path), Path: path, Msg: msg, Fix: fix})
}

func validate(c *Config, idx *nodeIndex) []Problem {
	v := &validator{idx: idx, file: c.File}
	if c.Admin.Listen != "off" {
		v.hostPort("admin.listen", c.Admin.Listen, `or "off" to run without the admin listener`)
		v.adminAccess(&c.Admin)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", fmt.Sprintf("unknown level %q", c.Log.Level), "use debug, info, warn or error")
	}
	v.positive("limits.max_connections", c.Limits.MaxConnections)
	v.positive("limits.max_handshakes", c.Limits.MaxHandshakes)
	v.positive("limits.max_header_bytes", c.Limits.MaxHeaderBytes)
	v.positive("limits.max_response_header_bytes", c.Limits.MaxResponseHeaderBytes)
	for _, d := range []struct {
		path string
		d    Duration
	}{
		{"limits.handshake_wait", c.Limits.HandshakeWait},
		{"timeouts.handshake", c.Timeouts.Handshake},
		{"timeouts.client_hello", c.Timeouts.ClientHello},
		{"timeouts.read_header", c.Timeouts.ReadHeader},
		{"timeouts.request_body", c.Timeouts.RequestBody},
		{"timeouts.idle", c.Timeouts.Idle},
		{"timeouts.upstream_connect", c.Timeouts.UpstreamConnect},
		{"timeouts.upstream_response", c.Timeouts.UpstreamResponse},
		{"timeouts.shutdown", c.Timeouts.Shutdown},
	} {
		if d.d < 0 {
			v.add(d.path, "a duration may not be negative", "write a positive duration such as \"5s\"")
		}
	}

	if r := c.Timeouts.RequestBodyMinRate; r != nil && *r < 0 {
		v.add("timeouts.request_body_min_rate", fmt.Sprintf("may not be negative, not %d", *r), "write bytes a second, such as 500, or 0 to turn the bound off")
	}

	if len(c.Listeners) == 0 && !v.idx.has("listeners[0]") {
		v.add("listeners", "no listener is configured", "add at least one entry under listeners: with listen, protocol and routes")
	}
	names := map[string]int{}
	addrs := map[string]int{}
	for i := range c.Listeners {
		v.listener(c, i, names, addrs)
	}
	v.addressOverlaps(c)
	v.sessionStore(c)
	upNames := make([]string, 0, len(c.Upstreams))
	for name := range c.Upstreams {
		upNames = append(upNames, name)
	}
	sort.Strings(upNames)
	for _, name := range upNames {
		v.upstream("upstreams."+name, c.Upstreams[name])
	}
	return v.probs
}

func (v *validator) positive(path string, n int) {
	if n <= 0 {
		v.add(path, fmt.Sprintf("must be greater than zero, not %d", n), "remove it to use the default")
	}
}

func (v *validator) hostPort(path, s, alt string) bool {
	fix := `write host:port, such as "127.0.0.1:9180" or ":443"`
	if alt != "" {
		fix += " " + alt
	}
	if s == "" {
		v.add(path, "no address given", fix)
		return false
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		v.add(path, fmt.Sprintf("%q is not host:port", s), fix)
		return false
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		v.add(path, fmt.Sprintf("%q has no valid port", s), fix)
		return false
	}
	return true
}

func (v *validator) listener(c *Config, i int, names, addrs map[string]int) {
	l := &c.Listeners[i]
	p := fmt.Sprintf("listeners[%d]", i)
	if j, dup := names[l.Name]; dup {
		v.add(p+".name", fmt.Sprintf("name %q is already used by listeners[%d]", l.Name, j), "give each listener its own name")
	} else {
		names[l.Name] = i
	}
	if v.hostPort(p+".listen", l.Listen, "") {
		if j, dup := addrs[l.Listen]; dup && !strings.HasSuffix(l.Listen, ":0") {
			v.add(p+".listen", fmt.Sprintf("address %q is already used by listeners[%d]", l.Listen, j), "give each listener its own port")
		} else {
			addrs[l.Listen] = i
		}
	}
	if l.RedirectHTTPS && l.Protocol != ProtocolHTTP {
		v.add(p+".redirect_https", "only an http listener redirects to HTTPS", "remove redirect_https, or set protocol: http on a port-80 listener")
	}
	switch l.Protocol {
	case ProtocolHTTP:
		v.httpListener(c, p, l)
	case ProtocolTCP:
		v.tcpListener(p, l)
	case ProtocolTLCP, ProtocolTLS, ProtocolAuto:
		if len(l.Sites) > 0 {
			v.sites(c, p, l)
		} else {
			v.protocolSections(p, l)
		}
	default:
		v.add(p+".protocol", fmt.Sprintf("unknown protocol %q", l.Protocol), "use tlcp, tls, auto, http or tcp")
	}
	if pp := l.ProxyProtocol; pp != nil {
		if len(pp.Trusted) == 0 {
			v.add(p+".proxy_protocol.trusted", "no trusted address given", "list the load balancers' addresses or CIDR ranges, such as 10.0.0.0/8")
		}
		for j, t := range pp.Trusted {
			if _, err := netip.ParsePrefix(t); err == nil {
				continue
			}
			if _, err := netip.ParseAddr(t); err == nil {
				continue
			}
			v.add(fmt.Sprintf("%s.proxy_protocol.trusted[%d]", p, j), fmt.Sprintf("%q is not an IP address or CIDR range", t), "write an address such as 10.0.0.5 or a range such as 10.0.0.0/8")
		}
	}
	if (l.Protocol == ProtocolHTTP || l.Protocol == ProtocolTCP) && l.HTTP2 != nil && *l.HTTP2 {
		v.add(p+".http2", "an "+l.Protocol+" listener does not offer HTTP/2", "remove http2")
	}
	// Only where the file sets it: a configuration built in code may hold
	// the default of the protocol it had before.
	if (l.Protocol == ProtocolHTTP || l.Protocol == ProtocolTCP) && v.idx.has(p+"."+gmCapableKey) {
		v.add(p+"."+gmCapableKey, "an "+l.Protocol+" listener makes no TLCP or TLS handshakes", "remove "+gmCapableKey)
	} else {
		v.gmCapable(p+"."+gmCapableKey, l.GMCapableTLSClients)
	}
	v.sessionHeaders(p+".session_headers", l.SessionHeaders)
	if len(l.Sites) == 0 {
		if len(l.Routes) == 0 && !l.RedirectHTTPS {
			v.add(p+".routes", "the listener has no route", "add routes: with at least one upstream")
		}
		v.routes(c, p, l, l.Routes)
		if l.TLCP != nil {
			v.tlcp(p+".tlcp", l.TLCP)
		}
		if l.TLS != nil {
			v.tls(c, p+".tls", l.TLS)
		}
		v.shangMiIdentity(p, l.Protocol, l.TLCP, l.TLS)
	}
}

// protocolSections checks that a flat-form listener has the tlcp and tls
// sections its protocol needs, and no other.
func (v *validator) protocolSections(p string, l *Listener) {
	switch l.Protocol {
	case ProtocolTLCP:
		v.needTLCP(p, l)
		if l.TLS != nil {
			v.add(p+".tls", "a tlcp listener does not use a tls section", "set protocol: auto to serve TLS clients on this port too, or remove the tls section")
		}
	case ProtocolTLS:
		if l.TLS == nil {
			v.add(p+".tls", "a tls listener needs a tls section", "add tls: with cert and key")
		}
		if l.TLCP != nil {
			v.add(p+".tlcp", "a tls listener does not use a tlcp section", "set protocol: auto to serve TLCP clients on this port too, or remove the tlcp section")
		}
	case ProtocolAuto:
		v.needTLCP(p, l)
		if l.TLS == nil && !l.TLCP.servesShangMi(nil) {
			v.add(p+".tls", "an auto listener needs a tls section for its TLS clients", "add tls: with cert and key, or set protocol: tlcp")
		}
	}
}

// sites checks a listener's sites: each named once, with hosts, the
// identity its protocol needs and routes; at most one default; no host
// pattern listed by two sites.
func (v *validator) sites(c *Config, p string, l *Listener) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"tlcp", l.TLCP != nil}, {"tls", l.TLS != nil}, {"routes", len(l.Routes) > 0}, {gmCapableKey, l.GMCapableTLSClients != ""}} {
		if f.set {
			v.add(p+"."+f.name, "a listener with sites keeps its "+f.name+" in each site", "move it under the site it belongs to, or remove sites to serve one identity")
		}
	}
	names := map[string]int{}
	hosts := map[string]int{}
	defaultAt := -1
	hasTLCP, hasTLS := false, false
	for j := range l.Sites {
		site := &l.Sites[j]
		sp := fmt.Sprintf("%s.sites[%d]", p, j)
		switch {
		case site.Name == "":
			v.add(sp+".name", "the site has no name", "name it (letters, digits, '-' and '_'); metrics and the access log use it")
		case !validSiteName(site.Name):
			v.add(sp+".name", fmt.Sprintf("%q is not a site name", site.Name), "use letters, digits, '-' and '_'")
		default:
			if k, dup := names[site.Name]; dup {
				v.add(sp+".name", fmt.Sprintf("name %q is already used by sites[%d]", site.Name, k), "give each site its own name")
			} else {
				names[site.Name] = j
			}
		}
		if site.Default {
			if defaultAt >= 0 {
				v.add(sp+".default", fmt.Sprintf("sites[%d] is the default already", defaultAt), "make one site the default")
			} else {
				defaultAt = j
			}
		}
		if len(site.Hosts) == 0 && !site.Default {
			v.add(sp+".hosts", "the site lists no host, so no client can reach it", "list its names, such as [api.example.cn, \"*.api.example.cn\"], or make it the default")
		}
		for k, h := range site.Hosts {
			hp := fmt.Sprintf("%s.hosts[%d]", sp, k)
			if bare, dot := strings.CutSuffix(h, "."); dot && validRequestHost(bare) {
				v.add(hp, fmt.Sprintf("%q ends in a dot", h), fmt.Sprintf("write it without the trailing dot, %q: a site's names match without it", bare))
				continue
			}
			if !validRequestHost(h) {
				v.add(hp, fmt.Sprintf("%q is not a host name or wildcard", h), "write a name such as api.example.cn or a wildcard such as *.example.cn")
				continue
			}
			key := strings.ToLower(strings.TrimSuffix(h, "."))
			if other, dup := hosts[key]; dup {
				what := "listed by sites[" + strconv.Itoa(other) + "] too"
				if other == j {
					what = "listed twice"
				}
				v.add(hp, fmt.Sprintf("%q is %s, so which site serves it is ambiguous", h, what), "list each name in one site only")
			} else {
				hosts[key] = j
			}
		}
		hasTLCP = hasTLCP || site.TLCP != nil
		// A site whose signing pair answers TLS 1.3 ShangMi serves TLS
		// clients of that kind without a tls section.
		hasTLS = hasTLS || site.TLS != nil || site.TLCP.servesShangMi(nil)
		switch {
		case l.Protocol == ProtocolTLCP && site.TLCP == nil:
			v.add(sp+".tlcp", "a site of a tlcp listener needs a tlcp section", "add tlcp: with sign_cert, sign_key, enc_cert and enc_key")
		case l.Protocol == ProtocolTLS && site.TLS == nil:
			v.add(sp+".tls", "a site of a tls listener needs a tls section", "add tls: with cert and key")
		case site.TLCP == nil && site.TLS == nil:
			v.add(sp, "the site has neither a tlcp nor a tls section", "add its TLCP certificates, its TLS certificate, or both")
		}
		if l.Protocol == ProtocolTLCP && site.TLS != nil {
			v.add(sp+".tls", "a tlcp listener does not use a tls section", "set protocol: auto to serve TLS clients on this port too, or remove the tls section")
		}
		if l.Protocol == ProtocolTLS && site.TLCP != nil {
			v.add(sp+".tlcp", "a tls listener does not use a tlcp section", "set protocol: auto to serve TLCP clients on this port too, or remove the tlcp section")
		}
		if site.TLCP != nil {
			v.tlcp(sp+".tlcp", site.TLCP)
		}
		if site.TLS != nil {
			v.tls(c, sp+".tls", site.TLS)
			if a := site.TLS.ACME; a != nil {
				for k, d := range a.Domains {
					if !siteHostsMatch(site.Hosts, d) {
						v.add(fmt.Sprintf("%s.tls.acme.domains[%d]", sp, k), fmt.Sprintf("%q is not one of the site's hosts, so its challenges would reach another site", d), "add it to the site's hosts, or remove it")
					}
				}
			}
		}
		v.shangMiIdentity(sp, l.Protocol, site.TLCP, site.TLS)
		if site.SessionHeaders != nil {
			v.sessionHeaders(sp+".session_headers", *site.SessionHeaders)
		}
		v.gmCapable(sp+"."+gmCapableKey, site.GMCapableTLSClients)
		if len(site.Routes) == 0 {
			v.add(sp+".routes", "the site has no route", "add routes: with at least one upstream")
		}
		v.routes(c, sp, l, site.Routes)
	}
	if l.Protocol == ProtocolAuto && !hasTLCP {
		v.add(p+".sites", "no site of this auto listener has a tlcp section, so TLCP clients cannot be served", "add tlcp to a site, or set protocol: tls")
	}
	if l.Protocol == ProtocolAuto && !hasTLS {
		v.add(p+".sites", "no site of this auto listener has a tls section, so TLS clients cannot be served", "add tls to a site, or set protocol: tlcp")
	}
}

// siteHostsMatch reports whether name is one of hosts or under one of
// their wildcards.
func siteHostsMatch(hosts []string, name string) bool {
	name = strings.ToLower(name)
	for _, h := range hosts {
		h = strings.ToLower(h)
		if h == name || strings.HasPrefix(h, "*.") && strings.HasSuffix(name, h[1:]) && len(name) > len(h)-1 {
			return true
		}
	}
	return false
}

func validSiteName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return len(s) <= 64
}

func (v *validator) sessionHeaders(p string, h SessionHeaders) {
	for _, f := range []struct{ field, name string }{
		{"protocol", h.Protocol},
		{"suite", h.Suite},
		{"resumed", h.Resumed},
		{"client_subject", h.ClientSubject},
		{"client_serial", h.ClientSerial},
		{"client_fingerprint", h.ClientFingerprint},
		{"client_verified", h.ClientVerified},
		{"client_issuer", h.ClientIssuer},
		{"client_sans", h.ClientSANs},
		{"client_cert", h.ClientCert},
		{"client_cert_chain", h.ClientCertChain},
		{"client_enc_cert", h.ClientEncCert},
	} {
		if f.name != "" && !validHeaderName(f.name) {
			v.add(p+"."+f.field, fmt.Sprintf("%q is not a valid header name", f.name), "use letters, digits and '-', such as X-TLCP-Suite")
		}
	}
	seen := map[string]string{}
	for _, f := range []struct{ field, name string }{
		{"client_cert", h.ClientCert}, {"client_cert_chain", h.ClientCertChain}, {"client_enc_cert", h.ClientEncCert},
	} {
		n := strings.ToLower(f.name)
		if n == "" {
			continue
		}
		if other, dup := seen[n]; dup {
			v.add(p+"."+f.field, fmt.Sprintf("%q is also the name of %s", f.name, other), "give each certificate header its own name, such as Client-Cert, Client-Cert-Chain and X-TLCP-Client-Enc-Cert")
		}
		seen[n] = f.field
	}
	switch {
	case h.ClientCertMaxBytes < 0:
		v.add(p+".client_cert_max_bytes", fmt.Sprintf("%d is negative", h.ClientCertMaxBytes), "leave it out for the default of 8000, or give a size in bytes")
	case h.ClientCertMaxBytes > 0 && h.ClientCertMaxBytes < minClientCertMaxBytes:
		v.add(p+".client_cert_max_bytes", fmt.Sprintf("%d bytes cannot hold a certificate", h.ClientCertMaxBytes), fmt.Sprintf("give at least %d, or leave it out for the default of 8000", minClientCertMaxBytes))
	case h.ClientCertMaxBytes > maxClientCertMaxBytes:
		v.add(p+".client_cert_max_bytes", fmt.Sprintf("%d bytes is more than upstreams accept in a header", h.ClientCertMaxBytes), fmt.Sprintf("give at most %d", maxClientCertMaxBytes))
	}
}

// Bounds of session_headers.client_cert_max_bytes: the base64 of a small
// certificate, and a size that most HTTP servers still take in one
// header line.
const (
	minClientCertMaxBytes = 512
	maxClientCertMaxBytes = 64 << 10
)

// routes checks the routes of a listener (or one of its sites) at path p.
func (v *validator) routes(c *Config, p string, l *Listener, routes []Route) {
	seen := map[string]int{}
	for j, r := range routes {
		rp := fmt.Sprintf("%s.routes[%d]", p, j)
		if r.Host != "" && !validRequestHost(r.Host) {
			v.add(rp+".host", fmt.Sprintf("%q is not a host name", r.Host), "write a name such as api.example.cn or *.example.cn, or leave it out to match any host")
		}
		if !strings.HasPrefix(r.Path, "/") {
			v.add(rp+".path", fmt.Sprintf("%q does not start with /", r.Path), "write a path prefix such as /api/")
		}
		key := strings.ToLower(r.Host) + " " + r.Path
		if k, dup := seen[key]; dup {
			v.add(rp, fmt.Sprintf("the same host and path as routes[%d], so it is never used", k), "remove one of them")
		} else {
			seen[key] = j
		}
		if r.Upstream == "" {
			v.add(rp+".upstream", "no upstream named", "name one of the pools under upstreams:")
			continue
		}
		u, ok := c.Upstreams[r.Upstream]
		if !ok || u == nil {
			// An upstream the file has, empty or of the wrong kind, is
			// reported where it is written.
			if v.idx.has("upstreams." + r.Upstream) {
				continue
			}
			v.add(rp+".upstream", fmt.Sprintf("no upstream is called %q", r.Upstream), "name one of the pools under upstreams: ("+strings.Join(upstreamNames(c), ", ")+")")
			continue
		}
		v.routeKind(rp, l, r, u.Scheme())
	}
}

// routeKind checks that a route and its upstream carry the same thing:
// HTTP requests, or whole connections (tcp:// upstreams, and every route
// of a tcp listener).
func (v *validator) routeKind(rp string, l *Listener, r Route, scheme string) {
	switch {
	case l.Protocol == ProtocolTCP && scheme != "" && scheme != "tcp" && scheme != "tlcp" && scheme != SchemeTLS13SM:
		v.add(rp+".upstream", fmt.Sprintf("a tcp listener forwards whole connections, which %s:// targets do not take", scheme), "route it to an upstream of tcp://, tlcp:// or tls13sm:// targets, or use protocol: http")
		return
	case l.Protocol == ProtocolHTTP && scheme == "tcp":
		v.add(rp+".upstream", "an http listener forwards HTTP requests, and tcp:// targets take whole connections", "use protocol: tcp for plain TCP clients, or an upstream of http://, https:// or tlcp:// targets")
		return
	}
	if l.Protocol == ProtocolTCP {
		if r.Host != "" {
			v.add(rp+".host", "a tcp listener has no host name to match: its clients send neither SNI nor a Host header", "remove host; a tcp listener takes one route")
		}
		if r.Path != "/" {
			v.add(rp+".path", "a tcp listener forwards whole connections and cannot match a path", "remove path")
		}
		return
	}
	if scheme == "tcp" && r.Path != "/" {
		v.add(rp+".path", "routes to tcp:// upstreams take whole connections and cannot match a path", "remove path, or use an http:// upstream")
	}
}

func upstreamNames(c *Config) []string {
	var out []string
	for n := range c.Upstreams {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (v *validator) needTLCP(p string, l *Listener) {
	if l.TLCP == nil {
		v.add(p+".tlcp", "a "+l.Protocol+" listener needs a tlcp section", "add tlcp: with sign_cert, sign_key, enc_cert and enc_key")
	}
}

func (v *validator) tlcp(p string, t *TLCP) {
	v.certFile("sign_cert", p, t.SignCert)
	v.keyRef(p+".sign_key", t.SignKey)
	v.certFile("enc_cert", p, t.EncCert)
	v.keyRef(p+".enc_key", t.EncKey)
	for i, s := range t.Suites {
		if _, ok := tlcp.CipherSuiteByName(s); !ok {
			v.add(fmt.Sprintf("%s.suites[%d]", p, i), fmt.Sprintf("unknown cipher suite %q", s), "use one of "+strings.Join(suiteNames(), ", "))
		}
	}
	v.clientAuth(p, t.ClientAuth, t.ClientCA)
	v.clientRevocation(p, t.ClientAuth, t.ClientRevocation)
	v.sessionCache(p, t.SessionCache)
	if t.TLS13ShangMi != "" && !slices.Contains(TLS13ShangMiModes, t.TLS13ShangMi) {
		v.add(p+".tls13_shangmi", fmt.Sprintf("unknown tls13_shangmi %q", t.TLS13ShangMi), "use one of "+strings.Join(TLS13ShangMiModes, ", "))
	}
	for i, g := range t.TLS13Groups {
		if _, ok := TLS13Group(g); !ok {
			v.add(fmt.Sprintf("%s.tls13_groups[%d]", p, i), fmt.Sprintf("unknown TLS 1.3 ShangMi group %q", g), "use curveSM2MLKEM768 or curveSM2")
		}
	}
}

// servesShangMi reports whether the section's signing pair answers TLS
// 1.3 ShangMi clients on an auto listener (tls13_shangmi is not off) of a
// site whose tls section (tl, nil for none) has no sm2 identity, which
// takes its place.
func (t *TLCP) servesShangMi(tl *TLS) bool {
	return t != nil && t.TLS13ShangMi != TLS13ShangMiOff && (tl == nil || tl.SM2 == nil)
}

// ServesShangMi is servesShangMi for proxy: whether the signing pair of
// the tlcp section answers TLS 1.3 ShangMi clients beside tls section tl.
func (t *TLCP) ServesShangMi(tl *TLS) bool { return t.servesShangMi(tl) }

// shangMiIdentity checks which identity of a site (at p) answers TLS 1.3
// ShangMi clients: a tls.sm2 identity takes the place of the tlcp
// signing pair, so the tlcp section's ShangMi settings written in the
// file would not be used.
func (v *validator) shangMiIdentity(p, protocol string, tc *TLCP, tl *TLS) {
	if tl == nil || tl.SM2 == nil || tc == nil || protocol != ProtocolAuto {
		return
	}
	for _, k := range []string{"tls13_shangmi", "tls13_groups"} {
		if v.idx.has(p + ".tlcp." + k) {
			v.add(p+".tlcp."+k, "tls.sm2 answers this site's TLS 1.3 ShangMi clients instead of the tlcp signing pair, so tlcp."+k+" is not used", "set "+k+" under tls.sm2, or remove tls.sm2 to serve TLS 1.3 ShangMi with the tlcp signing pair")
		}
	}
}

// TLS13Group returns the TLS 1.3 ShangMi group a tls13_groups entry
// names.
func TLS13Group(name string) (tls13.CurveID, bool) {
	for _, g := range []tls13.CurveID{tls13.CurveSM2MLKEM768, tls13.CurveSM2} {
		if g.String() == name {
			return g, true
		}
	}
	return 0, false
}

func (v *validator) sessionCache(p string, sc *SessionCache) {
	if sc == nil {
		return
	}
	if sc.Size != nil && (*sc.Size < 0 || *sc.Size > MaxSessionCacheSize) {
		v.add(p+".session_cache.size", fmt.Sprintf("%d is out of range", *sc.Size), fmt.Sprintf("use 0 (no resumption) to %d sessions", MaxSessionCacheSize))
	}
	if sc.Lifetime < 0 || sc.Lifetime.D() > MaxSessionLifetime {
		v.add(p+".session_cache.lifetime", fmt.Sprintf("%s is out of range", sc.Lifetime), "use a duration from 1s to 24h")
	}
}

func (v *validator) tls(c *Config, p string, t *TLS) {
	switch {
	case t.ACME != nil:
		v.acme(c, p, t)
	case t.HasStandard():
		v.certFile("cert", p, t.Cert)
		v.keyRef(p+".key", t.Key)
	}
	if t.MinVersion != "1.2" && t.MinVersion != "1.3" {
		v.add(p+".min_version", fmt.Sprintf("unknown TLS version %q", t.MinVersion), `use "1.2" or "1.3"`)
	}
	if t.HasStandard() {
		v.clientAuth(p, t.ClientAuth, t.ClientCA)
	} else {
		// A section with an SM2 identity alone: client_ca would verify
		// crypto/tls clients, which it does not serve.
		if !slices.Contains(ClientAuthModes, t.ClientAuth) {
			v.add(p+".client_auth", fmt.Sprintf("unknown client_auth %q", t.ClientAuth), "use one of "+strings.Join(ClientAuthModes, ", "))
		}
		if t.ClientCA != "" {
			v.add(p+".client_ca", "client_ca verifies the client certificates of crypto/tls clients, and this tls section has no cert for them, only sm2", "move the SM2 CAs to sm2.client_ca, or add cert and key")
		}
	}
	v.clientRevocation(p, t.ClientAuth, t.ClientRevocation)
	if sm := t.SM2; sm != nil {
		v.tlsSM2(p+".sm2", t.ClientAuth, sm)
	}
}

// tlsSM2 checks a tls section's SM2 identity (at p) under the section's
// client_auth.
func (v *validator) tlsSM2(p, clientAuth string, t *TLSSM2) {
	v.certFile("cert", p, t.Cert)
	v.keyRef(p+".key", t.Key)
	switch {
	case (clientAuth == "verify_if_given" || clientAuth == "require_and_verify") && t.ClientCA == "":
		v.add(p+".client_ca", "client_auth: "+clientAuth+" verifies the client certificates of TLS 1.3 ShangMi clients too, and no SM2 CA is given for them", "set client_ca under sm2 to a PEM file of the SM2 CAs that issue your clients' certificates")
	case t.ClientCA != "":
		v.notInline(p+".client_ca", t.ClientCA)
	}
	if t.TLS13ShangMi != "" && !slices.Contains(TLS13ShangMiModes, t.TLS13ShangMi) {
		v.add(p+".tls13_shangmi", fmt.Sprintf("unknown tls13_shangmi %q", t.TLS13ShangMi), "use one of "+strings.Join(TLS13ShangMiModes, ", "))
	}
	for i, g := range t.TLS13Groups {
		if _, ok := TLS13Group(g); !ok {
			v.add(fmt.Sprintf("%s.tls13_groups[%d]", p, i), fmt.Sprintf("unknown TLS 1.3 ShangMi group %q", g), "use curveSM2MLKEM768 or curveSM2")
		}
	}
}

// clientRevocation checks a site's client_revocation: it needs client
// certificates verified against client_ca.
func (v *validator) clientRevocation(p, clientAuth string, r *Revocation) {
	if r == nil {
		return
	}
	v.revocation(p+".client_revocation", r)
	if clientAuth != "verify_if_given" && clientAuth != "require_and_verify" && slices.Contains(ClientAuthModes, clientAuth) {
		v.add(p+".client_revocation", "client_auth "+clientAuth+" verifies no client certificate, so there is none to check for revocation", "set client_auth: require_and_verify (or verify_if_given) with client_ca, or remove client_revocation")
	}
}

// revocation checks the CRL sources, the OCSP setting and the timings
// of a revocation section (defaults applied).
func (v *validator) revocation(p string, r *Revocation) {
	if len(r.CRL) == 0 && r.OCSP == RevocationOCSPOff {
		v.add(p, "neither crl nor ocsp is set, so nothing is checked", "list CRL files or URLs under crl, set ocsp: aia, or remove the section")
	}
	seen := map[string]int{}
	for i, src := range r.CRL {
		sp := fmt.Sprintf("%s.crl[%d]", p, i)
		switch {
		case src == "":
			v.add(sp, "an empty CRL source", "give a CRL file path or an http(s):// URL")
			continue
		case !v.notInline(sp, src):
			continue
		case RevocationURL(src):
			if msg := revocationURLProblem(src); msg != "" {
				v.add(sp, msg, "write an http:// or https:// URL such as http://ca.example.cn/clients.crl")
				continue
			}
		}
		if j, dup := seen[src]; dup {
			v.add(sp, fmt.Sprintf("the same source as crl[%d]", j), "list each CRL once")
		} else {
			seen[src] = i
		}
	}
	switch r.OCSP {
	case RevocationOCSPOff, RevocationOCSPAIA:
	default:
		if !RevocationURL(r.OCSP) {
			v.add(p+".ocsp", fmt.Sprintf("unknown value %q", r.OCSP), "use off, aia (the responder each certificate names) or a responder's http:// URL")
		} else if msg := revocationURLProblem(r.OCSP); msg != "" {
			v.add(p+".ocsp", msg, "use off, aia (the responder each certificate names) or a responder's http:// URL")
		}
	}
	if r.Refresh < Duration(time.Second) || r.Refresh > Duration(7*24*time.Hour) {
		v.add(p+".refresh", fmt.Sprintf("%s is out of range", r.Refresh), "use a duration from 1s to 168h, such as 1h")
	}
	if g := r.Grace; g != nil && (*g < 0 || *g > Duration(30*24*time.Hour)) {
		v.add(p+".grace", fmt.Sprintf("%s is out of range", *g), "use a duration from 0s (no grace) to 720h, such as 1h")
	}
	switch r.Policy {
	case RevocationFailClosed, RevocationFailOpen:
	default:
		v.add(p+".policy", fmt.Sprintf("unknown policy %q", r.Policy), "use fail_closed (refuse a certificate whose status is unknown) or fail_open (admit it)")
	}
}

// upstreamRevocation checks an upstream's tls or tlcp revocation
// section, which needs the targets' certificates verified.
func (v *validator) upstreamRevocation(p string, insecure bool, r *Revocation) {
	if r == nil {
		return
	}
	v.revocation(p+".revocation", r)
	if insecure {
		v.add(p+".revocation", "insecure_skip_verify verifies no target certificate, so there is none to check for revocation", "remove insecure_skip_verify or revocation")
	}
}

// revocationURLProblem says what is wrong with a CRL or responder URL,
// without repeating any user information or query it may carry.
func revocationURLProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("the scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return "the URL names no host"
	}
	return ""
}

// httpListener checks a plain HTTP listener: it has no TLCP or TLS
// identity, and it either redirects every request to HTTPS or routes
// them.
func (v *validator) httpListener(c *Config, p string, l *Listener) {
	if l.TLCP != nil {
		v.add(p+".tlcp", "an http listener does not use a tlcp section", "remove it, or set protocol: tlcp")
	}
	if l.TLS != nil {
		v.add(p+".tls", "an http listener does not use a tls section", "remove it, or set protocol: tls")
	}
	if len(l.Sites) > 0 {
		v.add(p+".sites", "an http listener has no sites: it has no certificates to choose between", "put routes: on the listener, or set protocol: tls or auto")
	}
	if !l.RedirectHTTPS {
		return
	}
	if len(l.Routes) > 0 {
		v.add(p+".routes", "an http listener with redirect_https redirects every request, so its routes are never used", "remove routes, or remove redirect_https")
	}
	if _, ok := c.HTTPSPort(); !ok {
		v.add(p+".redirect_https", "there is no tls or auto listener to redirect to", "add a listener with protocol: tls or auto (browsers cannot speak TLCP), or remove redirect_https")
	}
}

// tcpListener checks a plain TCP listener: no TLCP or TLS identity and
// no session headers, since it sends no HTTP.
func (v *validator) tcpListener(p string, l *Listener) {
	if l.TLCP != nil {
		v.add(p+".tlcp", "a tcp listener does not use a tlcp section", "remove it; the TLCP client settings of a tlcp:// upstream go under upstreams.NAME.tlcp")
	}
	if l.TLS != nil {
		v.add(p+".tls", "a tcp listener does not use a tls section", "remove it, or set protocol: tls")
	}
	if l.SessionHeaders != (SessionHeaders{}) {
		v.add(p+".session_headers", "a tcp listener sends no HTTP headers", "remove session_headers")
	}
	if len(l.Sites) > 0 {
		v.add(p+".sites", "a tcp listener has no sites: it has no certificates to choose between", "put its route on the listener, or set protocol: tlcp, tls or auto")
	}
}

// HTTPSPort returns the port of the first tls or auto listener, where
// http listeners redirect to.
func (c *Config) HTTPSPort() (string, bool) {
	for _, l := range c.Listeners {
		if l.Protocol == ProtocolTLS || l.Protocol == ProtocolAuto {
			if _, port, err := net.SplitHostPort(l.Listen); err == nil {
				return port, true
			}
		}
	}
	return "", false
}

// ACMEKeyTypes are the values of acme.key_type.
var ACMEKeyTypes = []string{"p256", "p384", "rsa2048", "rsa4096"}

func (v *validator) acme(c *Config, p string, t *TLS) {
	a, ap := t.ACME, p+".acme"
	if t.Cert != "" || t.Key != "" {
		v.add(ap, "acme is set together with cert/key", "remove cert and key to let ACME obtain the certificate, or remove acme to serve the files")
	}
	if len(a.Domains) == 0 {
		v.add(ap+".domains", "no domain given", "list the names the certificate is for, such as [www.example.cn]")
	}
	for i, d := range a.Domains {
		dp := fmt.Sprintf("%s.domains[%d]", ap, i)
		switch {
		case strings.HasPrefix(d, "*."):
			v.add(dp, fmt.Sprintf("%q is a wildcard, which needs the DNS-01 challenge that gmgate does not answer", d), "list each name, or use a certificate file for the wildcard")
		case !validHost(d) || net.ParseIP(d) != nil:
			v.add(dp, fmt.Sprintf("%q is not a domain name", d), "write a name such as www.example.cn")
		}
	}
	if u, err := url.Parse(a.CA); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		v.add(ap+".ca", fmt.Sprintf("%q is not an ACME directory URL", a.CA), "write the directory's https:// URL, or remove ca for Let's Encrypt")
	}
	if a.CARoot != "" {
		v.notInline(ap+".ca_root", a.CARoot)
	}
	if !slices.Contains(ACMEKeyTypes, a.KeyType) {
		v.add(ap+".key_type", fmt.Sprintf("unknown key type %q", a.KeyType), "use one of "+strings.Join(ACMEKeyTypes, ", "))
	}
	for i, ch := range a.Challenges {
		cp := fmt.Sprintf("%s.challenges[%d]", ap, i)
		switch ch {
		case ChallengeHTTP01:
			if !c.hasHTTPListener() {
				v.add(cp, "http-01 is answered by an http listener, and there is none", `add a listener with protocol: http on ":80" (redirect_https: true is usual), or remove http-01`)
			}
		case ChallengeTLSALPN01:
		default:
			v.add(cp, fmt.Sprintf("unknown challenge %q", ch), "use http-01 or tls-alpn-01")
		}
	}
	if c.StateDir == "" {
		v.add("state_dir", "ACME needs a state directory for its account and certificates", "set state_dir, or remove it to use "+DefaultStateDir)
	}
}

// addressOverlaps reports listener and admin addresses that cannot be
// bound together: the same port on the same host, or on a wildcard host
// and any other. Exact duplicates of listeners are reported by listener.
func (v *validator) addressOverlaps(c *Config) {
	type bound struct{ path, addr string }
	var all []bound
	for i, l := range c.Listeners {
		all = append(all, bound{fmt.Sprintf("listeners[%d].listen", i), l.Listen})
	}
	if c.Admin.Listen != "off" {
		all = append(all, bound{"admin.listen", c.Admin.Listen})
	}
	for j := 1; j < len(all); j++ {
		for i := 0; i < j; i++ {
			a, b := all[i], all[j]
			if a.addr == b.addr && b.path != "admin.listen" {
				continue // reported as "already used"
			}
			if !addressesOverlap(a.addr, b.addr) {
				continue
			}
			what := strings.TrimSuffix(a.path, ".listen")
			if a.addr == b.addr {
				v.add(b.path, fmt.Sprintf("%q is also the address of %s", b.addr, what), "give the admin listener a port of its own, such as 127.0.0.1:9180")
				continue
			}
			v.add(b.path, fmt.Sprintf("%q and %q of %s share a port, and a wildcard address takes that port on every interface, so both cannot be bound", b.addr, a.addr, what), "give each its own port, or bind both to specific addresses")
		}
	}
}

// addressesOverlap reports whether two host:port addresses cannot both be
// bound. Port 0 (any free port) never overlaps. Host names are compared
// as written.
func addressesOverlap(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wa, wb := wildcardFamily(ha), wildcardFamily(hb)
	switch {
	case ha == hb:
		return true
	case wa == "any" || wb == "any":
		return true
	case wa == "ip4":
		return wb == "ip4" || isIPv4OrName(hb)
	case wb == "ip4":
		return isIPv4OrName(ha)
	}
	return false
}

// wildcardFamily says which addresses a wildcard host takes: "any" for
// "" and "::" (both families on Linux), "ip4" for 0.0.0.0, "" for a
// specific host.
func wildcardFamily(h string) string {
	switch h {
	case "", "::", "[::]":
		return "any"
	case "0.0.0.0":
		return "ip4"
	}
	return ""
}

func isIPv4OrName(h string) bool {
	ip, err := netip.ParseAddr(h)
	return err != nil || ip.Is4() || ip.Is4In6()
}

// ClientAuthModes are the values of client_auth.
var ClientAuthModes = []string{"none", "request", "require", "verify_if_given", "require_and_verify"}

func (v *validator) clientAuth(p, mode, ca string) {
	switch mode {
	case "none", "request", "require":
	case "verify_if_given", "require_and_verify":
		if ca == "" {
			v.add(p+".client_ca", "client_auth: "+mode+" needs the CAs that verify client certificates", "set client_ca to a PEM file of CA certificates")
		}
	default:
		v.add(p+".client_auth", fmt.Sprintf("unknown client_auth %q", mode), "use one of "+strings.Join(ClientAuthModes, ", "))
	}
	if ca != "" {
		v.notInline(p+".client_ca", ca)
	}
}

func (v *validator) certFile(field, p, s string) {
	path := p + "." + field
	if s == "" {
		v.add(path, "no certificate file given", "set it to the path of a PEM certificate file")
		return
	}
	v.notInline(path, s)
}

func (v *validator) notInline(path, s string) bool {
	if strings.Contains(s, "-----BEGIN") {
		v.add(path, "PEM data written inline", "put it in a file and give the file's path")
		return false
	}
	return true
}

// keyRef checks a key reference without opening it: it must name the key,
// never contain it or its password.
func (v *validator) keyRef(path, s string) {
	if s == "" {
		v.add(path, "no key given", "set it to a key file path, file:/path?password-env=VAR, or an sdf: reference")
		return
	}
	if !v.notInline(path, s) {
		return
	}
	_, query, ok := strings.Cut(s, "?")
	if !ok {
		return
	}
	// Checked before the query is parsed, so that a secret is found
	// in whatever case or encoding it was written; nothing of the
	// reference is repeated in the message.
	if secret, found := keyref.InlineSecret(query); found {
		v.add(path, "the "+secret+" is written in the configuration", "use "+secret+"-env=VAR or "+secret+"-file=PATH so that it stays out of the file")
		return
	}
	if _, err := url.ParseQuery(query); err != nil {
		v.add(path, "the key reference's parameters cannot be read", "write them as name=value pairs joined by &")
	}
}

func (v *validator) upstream(p string, u *Upstream) {
	if u == nil {
		v.add(p, "the upstream is empty", "give it targets: [\"http://host:port\"]")
		return
	}
	if len(u.Targets) == 0 {
		v.add(p+".targets", "no targets", `list at least one, such as "http://10.0.0.5:8080"`)
	}
	scheme := ""
	for i, t := range u.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", p, i)
		s, err := ParseTarget(t)
		if err != nil {
			v.add(tp, err.Error(), `write scheme://host:port with scheme http, https, h2c, tlcp, tls13sm or tcp`)
			continue
		}
		if scheme == "" {
			scheme = s.Scheme
		} else if s.Scheme != scheme {
			v.add(tp, fmt.Sprintf("a %s:// target in a pool of %s:// targets", s.Scheme, scheme), "put targets of each kind in their own upstream")
		}
	}
	switch u.Policy {
	case PolicyRoundRobin, PolicyLeastConn:
	default:
		v.add(p+".policy", fmt.Sprintf("unknown policy %q", u.Policy), "use round_robin or least_conn")
	}
	if u.HTTP2 && scheme != "" && scheme != "https" && scheme != "tlcp" {
		fix := "remove http2"
		switch scheme {
		case "http":
			fix = "write the targets as h2c://host:port for HTTP/2 without TLS, or remove http2"
		case "h2c":
			fix = "remove http2: h2c:// targets always speak HTTP/2"
		}
		v.add(p+".http2", "http2 applies to https:// and tlcp:// targets", fix)
	}
	if u.Host != "" {
		switch {
		case scheme == "tcp":
			v.add(p+".host", "tcp:// targets take whole connections and get no Host header", "remove host")
		case u.Host != UpstreamHostTarget && !validHostHeader(u.Host):
			v.add(p+".host", fmt.Sprintf("%q is not a host name or IP address with an optional port", u.Host), `write "target" to send each target's own host, or a name such as api.partner.cn or api.partner.cn:8443 (an IPv6 address in brackets)`)
		}
	}
	if u.TLS != nil {
		if scheme != "" && scheme != "https" {
			v.add(p+".tls", "tls settings apply to https:// targets only", "remove tls, or use https:// targets")
		}
		if (u.TLS.Cert == "") != (u.TLS.Key == "") {
			v.add(p+".tls", "a client certificate needs both cert and key", "set both or neither")
		}
		if u.TLS.Key != "" {
			v.keyRef(p+".tls.key", u.TLS.Key)
		}
		for _, f := range []struct{ name, val string }{{"ca", u.TLS.CA}, {"cert", u.TLS.Cert}} {
			if f.val != "" {
				v.notInline(p+".tls."+f.name, f.val)
			}
		}
	}
	if u.TLCP != nil {
		if scheme != "" && scheme != "tlcp" {
			v.add(p+".tlcp", "tlcp settings apply to tlcp:// targets only", "remove tlcp, or use tlcp:// targets")
		}
		v.upstreamTLCP(p+".tlcp", u.TLCP)
	}
	if u.TLS13SM != nil {
		v.upstreamTLS13SM(p+".tls13sm", scheme, u.TLS13SM)
	}
	if u.TLS != nil {
		v.upstreamRevocation(p+".tls", u.TLS.InsecureSkipVerify, u.TLS.Revocation)
	}
	if u.TLCP != nil {
		v.upstreamRevocation(p+".tlcp", u.TLCP.InsecureSkipVerify, u.TLCP.Revocation)
	}
	if u.Health.Path != "" {
		if scheme == "tcp" {
			v.add(p+".health.path", "tcp:// targets are checked by connecting, not by path", "remove path")
		} else if !strings.HasPrefix(u.Health.Path, "/") {
			v.add(p+".health.path", fmt.Sprintf("%q does not start with /", u.Health.Path), "write a path such as /healthz")
		}
	}
	v.positive(p+".health.fails", u.Health.Fails)
	v.positive(p+".health.passes", u.Health.Passes)
	if u.Health.Interval <= 0 {
		v.add(p+".health.interval", "must be greater than zero", `write a duration such as "5s"`)
	}
	if u.Health.Timeout <= 0 {
		v.add(p+".health.timeout", "must be greater than zero", `write a duration such as "2s"`)
	}
	if u.Passive.MaxFails != nil && *u.Passive.MaxFails < 0 {
		v.add(p+".passive.max_fails", "may not be negative", "use 0 to turn passive ejection off")
	}
	if t := u.Passive.PanicThreshold; t != nil && (*t < 0 || *t > 100) {
		v.add(p+".passive.panic_threshold", fmt.Sprintf("%d is not a percentage", *t), "use a number from 0 (off) to 100")
	}
	if u.Passive.EjectFor <= 0 {
		v.add(p+".passive.eject_for", "must be greater than zero", `write a duration such as "30s"`)
	}
	if u.Retries != nil && (*u.Retries < 0 || *u.Retries > 10) {
		v.add(p+".retries", fmt.Sprintf("%d is out of range", *u.Retries), "use a number from 0 to 10")
	}
	v.targetLimits(p, u, scheme)
}

// targetLimits checks the bound on each target's requests in flight and
// the queue of those waiting for one.
func (v *validator) targetLimits(p string, u *Upstream, scheme string) {
	if scheme == "tcp" {
		for _, k := range []struct {
			name string
			set  bool
		}{
			{"max_conns_per_target", u.MaxConnsPerTarget != nil},
			{"queue_size", u.QueueSize != nil},
			{"queue_timeout", u.QueueTimeout != 0},
		} {
			if k.set {
				v.add(p+"."+k.name, "tcp:// targets take one connection per client connection, which limits.max_connections bounds", "remove "+k.name)
			}
		}
		return
	}
	if n := u.MaxConnsPerTarget; n != nil && *n <= 0 {
		v.add(p+".max_conns_per_target", fmt.Sprintf("must be greater than zero, not %d", *n), "remove it for the default, limits.max_connections")
	}
	if u.QueueSize != nil && *u.QueueSize < 0 {
		v.add(p+".queue_size", fmt.Sprintf("may not be negative, not %d", *u.QueueSize), "use 0 to answer 503 at once when every connection is in use")
	}
	if u.QueueTimeout < 0 {
		v.add(p+".queue_timeout", "a duration may not be negative", `write a duration such as "5s", or use queue_size: 0 for no waiting`)
	}
}

// upstreamTLCP checks the TLCP client settings of a tlcp:// upstream
// without opening anything: proxy loads the certificates and keys.
func (v *validator) upstreamTLCP(p string, t *UpstreamTLCP) {
	if t.CA != "" {
		v.notInline(p+".ca", t.CA)
	}
	if t.ServerName != "" && !validHost(t.ServerName) && net.ParseIP(t.ServerName) == nil {
		v.add(p+".server_name", fmt.Sprintf("%q is not a host name or IP address", t.ServerName), "write the name the targets' signing certificate carries, such as api.partner.cn")
	}
	if t.HasIdentity() {
		// Each problem at a field that is in the file.
		pair := func(certField, cert, keyField, key, what string) {
			switch {
			case cert != "" && key == "":
				v.add(p+"."+certField, "the "+what+" certificate has no key: "+keyField+" is not set", "set "+keyField+" to the certificate's key")
			case cert == "" && key != "":
				v.add(p+"."+keyField, "the "+what+" key has no certificate: "+certField+" is not set", "set "+certField+" to the key's certificate")
			}
		}
		pair("sign_cert", t.SignCert, "sign_key", t.SignKey, "signing")
		pair("enc_cert", t.EncCert, "enc_key", t.EncKey, "encryption")
		if t.SignCert == "" && t.SignKey == "" {
			field := "enc_cert"
			if t.EncCert == "" {
				field = "enc_key"
			}
			v.add(p+"."+field, "an encryption pair without a signing pair: the client authenticates with its signing certificate", "set sign_cert and sign_key too")
		}
		for _, f := range []struct{ name, val string }{{"sign_cert", t.SignCert}, {"enc_cert", t.EncCert}} {
			if f.val != "" {
				v.notInline(p+"."+f.name, f.val)
			}
		}
		for _, f := range []struct{ name, val string }{{"sign_key", t.SignKey}, {"enc_key", t.EncKey}} {
			if f.val != "" {
				v.keyRef(p+"."+f.name, f.val)
			}
		}
	}
	for i, s := range t.Suites {
		sp := fmt.Sprintf("%s.suites[%d]", p, i)
		id, ok := tlcp.CipherSuiteByName(s)
		if !ok {
			v.add(sp, fmt.Sprintf("unknown cipher suite %q", s), "use one of "+strings.Join(suiteNames(), ", "))
			continue
		}
		if isECDHE(id) && !t.SuitesDefaulted && !t.HasEncPair() {
			v.add(sp, s+" needs the client's encryption certificate, and none is configured", "set enc_cert and enc_key, or offer the ECC suites only")
		}
	}
	if !slices.Contains(tlcp.ClientProfiles, t.Profile) && t.Profile != UpstreamProfileAuto {
		v.add(p+".profile", fmt.Sprintf("unknown profile %q", t.Profile), "use "+strings.Join(tlcp.ClientProfiles, ", ")+" or "+UpstreamProfileAuto+" (gmssl for GmSSL 3 servers that ask for a client certificate, auto to find out per target)")
	}
	v.sessionCache(p, t.SessionCache)
}

func suiteNames() []string {
	var names []string
	for _, cs := range tlcp.CipherSuites() {
		names = append(names, cs.Name)
	}
	return names
}

func isECDHE(id uint16) bool {
	for _, cs := range tlcp.CipherSuites() {
		if cs.ID == id {
			return cs.ECDHE
		}
	}
	return false
}

// Scheme returns the scheme shared by the upstream's targets ("" when it
// has none that parse).
func (u *Upstream) Scheme() string {
	for _, t := range u.Targets {
		if s, err := ParseTarget(t); err == nil {
			return s.Scheme
		}
	}
	return ""
}

// ParseTarget parses an upstream target, scheme://host:port.
func ParseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not scheme://host:port", s)
	}
	switch u.Scheme {
	case "http", "https", "h2c", "tlcp", SchemeTLS13SM, "tcp":
	default:
		return nil, fmt.Errorf("unknown scheme %q in %q", u.Scheme, s)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q carries user information; credentials do not belong in the configuration", u.Redacted())
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q has a path or query; targets are scheme://host:port", s)
	}
	if u.Port() == "" {
		if u.Scheme == "tcp" || u.Scheme == "h2c" {
			return nil, fmt.Errorf("%q has no port", s)
		}
	}
	return u, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// validRequestHost reports whether s, a host or wildcard of a site or
// route, is a name a request or ClientHello can name: the one parser of
// request hosts (internal/route) takes it, so that no configured name is
// one no request ever matches ("127.1", "010.0.0.1").
func validRequestHost(s string) bool {
	name := strings.TrimPrefix(s, "*.")
	_, ok := hostname.ParseServerName(name)
	return ok && validHost(name)
}

// validHostHeader reports whether s is a Host header gmgate may send: a
// host name or IP address (IPv6 in brackets), with a port or without.
func validHostHeader(s string) bool {
	host := s
	if strings.Contains(s, ":") && !strings.HasSuffix(s, "]") {
		var port string
		var err error
		if host, port, err = net.SplitHostPort(s); err != nil {
			return false
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return false
		}
		if strings.Contains(host, ":") {
			// An IPv6 address: SplitHostPort took the brackets off.
			return net.ParseIP(host) != nil
		}
	} else if strings.HasPrefix(s, "[") {
		ip := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		return strings.Contains(ip, ":") && net.ParseIP(ip) != nil
	}
	return !strings.HasPrefix(host, "*.") && (validHost(host) || net.ParseIP(host) != nil)
}

// knownFields lists the YAML keys allowed under a field path.
func knownFields(path string) []string {
	t := reflect.TypeOf(Config{})
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			if i := strings.IndexByte(seg, '['); i >= 0 {
				seg = seg[:i]
			}
			t = deref(t)
			switch t.Kind() {
			case reflect.Map:
				t = deref(t.Elem())
				continue
			case reflect.Struct:
			default:
				return nil
			}
			f, ok := fieldByTag(t, seg)
			if !ok {
				// A map key (upstream name): step into the map's values.
				return nil
			}
			t = deref(f.Type)
			if t.Kind() == reflect.Slice {
				t = deref(t.Elem())
			}
		}
	}
	t = deref(t)
	if t.Kind() == reflect.Map {
		t = deref(t.Elem())
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("yaml"), ",")[0] == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// adminAccess checks the admin listener's access control: off loopback it
// needs a bearer token or client certificates, and the write actions
// need the token.
func (v *validator) adminAccess(a *Admin) {
	if (a.Cert == "") != (a.Key == "") {
		v.add("admin.cert", "admin.cert and admin.key go together", "give both (the admin listener then speaks TLS), or neither")
	}
	if t := a.TLCP; t != nil {
		for _, f := range []struct{ name, value string }{{"sign_cert", t.SignCert}, {"sign_key", t.SignKey}, {"enc_cert", t.EncCert}, {"enc_key", t.EncKey}} {
			if f.value == "" {
				v.add("admin.tlcp."+f.name, "the admin listener's TLCP identity needs a signing and an encryption certificate and key", "give sign_cert, sign_key, enc_cert and enc_key (gmgate cert issue makes them), or drop admin.tlcp")
			}
		}
	}
	if a.ClientCA != "" && a.Cert == "" && a.TLCP == nil {
		v.add("admin.client_ca", "client certificates need the admin listener to speak TLS or TLCP", "set admin.cert and admin.key, or admin.tlcp, too")
	}
	if a.WriteActions && a.TokenFile == "" {
		v.add("admin.write_actions", "the write actions are for holders of the bearer token, and there is none", "set admin.token_file, or leave write_actions off")
	}
	if !AdminLoopback(a.Listen) && a.TokenFile == "" && a.ClientCA == "" {
		v.add("admin.listen", fmt.Sprintf("%q is not a loopback address, and the admin listener has no access control", a.Listen),
			"set admin.token_file (a file holding a bearer token) or admin.client_ca with admin.cert and admin.key or admin.tlcp (client certificates), or listen on 127.0.0.1")
	}
}

// AdminLoopback reports whether the admin address addr (host:port) is
// reachable from this host only: a loopback IP or localhost. An empty
// host (every interface) is not.
func AdminLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

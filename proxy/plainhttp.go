package proxy

import (
	"crypto/x509"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/acme"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/upstream"
)

// plainHTTP is what an http listener does besides routing: it answers
// ACME HTTP-01 challenges, and with redirect_https it sends every other
// request to the HTTPS port.
//
// An http listener otherwise routes like any listener, so it also serves
// local applications that speak plain HTTP to gmgate (on loopback), which
// then forwards to upstreams of any scheme.
type plainHTTP struct {
	// redirectPort is the HTTPS port redirects go to ("" for none).
	redirectPort string
	// redirectNames are the names redirects may go to.
	redirectNames *servedNames
	// acme answer HTTP-01 challenges.
	acme []*acme.Manager
}

func newPlainHTTP(lc config.Listener, gen *generation) *plainHTTP {
	p := &plainHTTP{}
	if lc.RedirectHTTPS {
		p.redirectPort, _ = gen.cfg.HTTPSPort()
		p.redirectNames = newServedNames(gen)
	}
	for _, site := range gen.acme {
		if slices.Contains(site.spec.acme.Challenges, config.ChallengeHTTP01) {
			p.acme = append(p.acme, site.mgr)
		}
	}
	return p
}

// intercept answers r when it is an ACME challenge or redirected to
// HTTPS, and reports whether it did. host is r's host, valid and
// canonical (requestHost); the redirect keeps r's path and query, never
// the host of an absolute-form target.
func (p *plainHTTP) intercept(w http.ResponseWriter, r *http.Request, host hostname.Host) bool {
	for _, a := range p.acme {
		if a.HandleHTTPChallenge(w, r) {
			return true
		}
	}
	if p.redirectPort == "" {
		return false
	}
	name := host.Name
	if !p.redirectNames.serves(name) {
		// A redirect to whatever the client named would send a browser
		// anywhere (a Host a cache or a link forged); the default
		// site's name is where a lost client belongs.
		if name = p.redirectNames.fallback(); name == "" {
			forward.PlainError(w, http.StatusBadRequest, "the request names no host this gateway serves")
			return true
		}
	}
	authority := name // an IPv6 address in its brackets
	if p.redirectPort != "443" {
		authority += ":" + p.redirectPort
	}
	w.Header().Set("Location", "https://"+authority+r.URL.RequestURI())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMovedPermanently)
	_, _ = w.Write([]byte("Moved to HTTPS.\n"))
	return true
}

// servePlainHTTP hands a connection of an http listener to its HTTP
// server: there is no handshake to make.
func (s *Server) servePlainHTTP(rl *runningListener, conn net.Conn, client net.Addr) {
	_ = conn.SetDeadline(time.Time{})
	info := &forward.ConnInfo{Listener: rl.name, Client: client, Protocol: "http", Site: config.DefaultSiteName}
	st := rl.state.Load()
	hc := &edge.HTTPConn{Conn: conn, Info: info, Bound: upstream.WriteBound{Timeout: st.idle}}
	if !rl.httpConns.Push(hc) {
		hc.Close()
	}
}

// resolveRedirectPorts gives redirects to a listener configured on port 0
// (any free port) the port it was bound to; bound finds a bound listener
// by name.
func resolveRedirectPorts(gen *generation, bound func(name string) *runningListener) {
	name := ""
	for _, lc := range gen.cfg.Listeners {
		if lc.Protocol == config.ProtocolTLS || lc.Protocol == config.ProtocolAuto {
			name = lc.Name
			break
		}
	}
	for _, st := range gen.states {
		if st.plain == nil || st.plain.redirectPort != "0" {
			continue
		}
		if rl := bound(name); rl != nil {
			if a, ok := rl.ln.Addr().(*net.TCPAddr); ok {
				st.plain.redirectPort = strconv.Itoa(a.Port)
			}
		}
	}
}

// servedNames are the names the HTTPS listener that redirects go to (the
// first tls or auto listener) serves: the hosts of its sites, exact or
// wildcard, and for a site that lists none (the flat form, or a default
// site without hosts) the names its certificates carry and its ACME
// domains, looked up when asked, as certificates change on reload.
type servedNames struct {
	patterns []string // canonical (hostname.Pattern)
	// defaultName is the default site's first exact host, "" when it has
	// none.
	defaultName string
	// open are the sites without hosts.
	open  []openSite
	store *certs.Store
}

// openSite is a site that lists no hosts: its certificate source and its
// ACME domains.
type openSite struct {
	source string
	acme   []string // canonical
}

func newServedNames(gen *generation) *servedNames {
	n := &servedNames{store: gen.store}
	for _, lc := range gen.cfg.Listeners {
		if lc.Protocol != config.ProtocolTLS && lc.Protocol != config.ProtocolAuto {
			continue
		}
		for _, sc := range lc.SiteList() {
			for _, h := range sc.Hosts {
				pattern := hostname.Pattern(h)
				n.patterns = append(n.patterns, pattern)
				if sc.Default && n.defaultName == "" && !strings.HasPrefix(pattern, "*") {
					n.defaultName = pattern
				}
			}
			if len(sc.Hosts) == 0 {
				o := openSite{source: siteSpec{lc: lc, cfg: sc}.source()}
				if sc.TLS != nil && sc.TLS.ACME != nil {
					for _, d := range sc.TLS.ACME.Domains {
						o.acme = append(o.acme, hostname.Pattern(d))
					}
				}
				n.open = append(n.open, o)
			}
		}
		break // the listener HTTPSPort names
	}
	return n
}

// serves reports whether the canonical name is one the HTTPS listener
// serves.
func (n *servedNames) serves(name string) bool {
	if name == "" {
		return false
	}
	for _, p := range n.patterns {
		if hostname.Match(p, name) {
			return true
		}
	}
	for _, o := range n.open {
		if slices.Contains(o.acme, name) {
			return true
		}
		for _, c := range n.certificates(o) {
			if certificateNames(c, name) {
				return true
			}
		}
	}
	return false
}

// fallback is the name a request for a name the listener does not serve
// is sent to: the default site's first exact host, or for a default site
// without hosts its first ACME domain or the first exact DNS name of its
// certificates; "" when there is none.
func (n *servedNames) fallback() string {
	if n.defaultName != "" {
		return n.defaultName
	}
	for _, o := range n.open {
		if len(o.acme) > 0 {
			return o.acme[0]
		}
		for _, c := range n.certificates(o) {
			for _, d := range c.DNSNames {
				if p := hostname.Pattern(d); !strings.HasPrefix(p, "*") {
					if name, ok := hostname.ParseServerName(p); ok {
						return name
					}
				}
			}
		}
	}
	return ""
}

// servedCert is what a certificate says it is for.
type servedCert struct {
	DNSNames []string
	IPs      []net.IP
}

// certificates are the TLS certificate and the TLCP signing certificate
// of a site without hosts, as served now.
func (n *servedNames) certificates(o openSite) []servedCert {
	if n.store == nil {
		return nil
	}
	var out []servedCert
	if c := n.store.TLSCertificate(o.source); c != nil {
		leaf := c.Leaf
		if leaf == nil && len(c.Certificate) > 0 {
			leaf, _ = x509.ParseCertificate(c.Certificate[0])
		}
		if leaf != nil {
			out = append(out, servedCert{DNSNames: leaf.DNSNames, IPs: leaf.IPAddresses})
		}
	}
	if c := n.store.TLCPCertificate(o.source); c != nil {
		leaf := c.SignLeaf
		if leaf == nil && len(c.SignCertificate) > 0 {
			leaf, _ = smx509.ParseCertificate(c.SignCertificate[0])
		}
		if leaf != nil {
			out = append(out, servedCert{DNSNames: leaf.DNSNames, IPs: leaf.IPAddresses})
		}
	}
	return out
}

// certificateNames reports whether a certificate is for the canonical
// name: one of its DNS names (wildcards included) or IP addresses.
func certificateNames(c servedCert, name string) bool {
	for _, d := range c.DNSNames {
		if hostname.Match(hostname.Pattern(d), name) {
			return true
		}
	}
	addr, err := netip.ParseAddr(strings.Trim(name, "[]"))
	if err != nil {
		return false
	}
	for _, ip := range c.IPs {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap() == addr.Unmap() {
			return true
		}
	}
	return false
}

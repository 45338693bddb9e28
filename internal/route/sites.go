package route

import (
	"crypto/tls"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
	"github.com/prometheus/client_golang/prometheus"
)

// A site is one identity of a listener: the names it answers for, its
// TLCP and TLS configurations (certificates, client authentication,
// sessions) and its routes. The flat form of the configuration is one
// implicit site that answers for every name.
//
// The site of a connection is chosen once, from the server name of its
// ClientHello (SNI), by siteIndex.lookup, on both protocols through
// GetConfigForClient; the host of each of its requests must then choose
// the same site (SiteTable.ForRequest; 421 otherwise), so that a client
// that passed a lax site's handshake cannot reach a strict site's routes.
type Site struct {
	Name     string
	Implicit bool
	// source names the site's certificates in the certificate store (and
	// ACME): the listener's name in the flat form, listener/site
	// otherwise.
	Source    string
	Hosts     []string
	IsDefault bool
	TLCP      *tlcp.Config // nil when the site serves no TLCP
	TLS       *tls.Config  // nil when the site serves no TLS
	Router    *Router
	Headers   config.SessionHeaders
	// forwarding is what the site does to the headers of the requests it
	// forwards.
	Forwarding *forward.HeaderPolicy
	// requests observe request durations by HTTP version (1.x, 2).
	Requests [2]prometheus.Observer
	// GMCapableTLCP answers a TLS ClientHello that offers TLCP suites in
	// TLCP (gm_capable_tls_clients: tlcp); only a site with TLCP can.
	GMCapableTLCP bool

	// tls13 serves TLS 1.3 ClientHellos that offer the ShangMi suites
	// (RFC 8998) with the site's SM2 identity (tls.sm2, or the TLCP
	// signing pair); nil when the site serves none. tls13Preferred says whether it serves those that
	// offer the standard TLS 1.3 suites too (tls13_shangmi: prefer) or
	// only those that offer nothing else (accept).
	TLS13          *tls13.Config
	TLS13Preferred bool
}

// httpVersions label the request metrics: index 0 HTTP/1.x, 1 HTTP/2.
var HTTPVersions = [2]string{"1.1", "2"}

// siteIndex finds the site for a server name among some of a listener's
// sites: an exact name first, then the longest wildcard, then the
// default. It is the one place where names select sites.
type SiteIndex struct {
	exact     map[string]*Site
	wildcards []wildcardSite // longest suffix first
	def       *Site
}

type wildcardSite struct {
	pattern string // "*.example.cn"
	site    *Site
}

func NewSiteIndex(sites []*Site, keep func(*Site) bool) *SiteIndex {
	x := &SiteIndex{exact: map[string]*Site{}}
	for _, s := range sites {
		if !keep(s) {
			continue
		}
		if s.IsDefault {
			x.def = s
		}
		for _, h := range s.Hosts {
			if strings.HasPrefix(h, "*") {
				x.wildcards = append(x.wildcards, wildcardSite{pattern: h, site: s})
			} else {
				x.exact[h] = s
			}
		}
	}
	sort.SliceStable(x.wildcards, func(i, j int) bool { return len(x.wildcards[i].pattern) > len(x.wildcards[j].pattern) })
	return x
}

// lookup returns the site for a canonical name (hostname.Host.Name, or what
// hostname.ParseServerName returns; "" for none), or nil when no site
// answers for it and there is no default. It does not allocate, as it
// runs for every request.
func (x *SiteIndex) Lookup(name string) *Site {
	if len(x.exact) == 0 && len(x.wildcards) == 0 {
		return x.def
	}
	if s := x.exact[name]; s != nil {
		return s
	}
	for _, w := range x.wildcards {
		if hostname.Match(w.pattern, name) {
			return w.site
		}
	}
	return x.def
}

// lookupServerName returns the site for the server name of a ClientHello,
// or nil when no site answers for it and there is no default, or when it
// is not a host name (hostname.ParseServerName): such a name is refused with
// unrecognized_name, as nginx refuses it, rather than given the default
// site.
func (x *SiteIndex) LookupServerName(sni string) *Site {
	name, ok := hostname.ParseServerName(sni)
	if !ok {
		return nil
	}
	return x.Lookup(name)
}

// siteTable is a listener's sites, indexed for each protocol and for
// Host headers.
type SiteTable struct {
	Sites []*Site
	// all finds the site a request's Host names; tlcp and tls the site a
	// handshake of that protocol serves.
	All, TLCP, TLS *SiteIndex
	// servesTLS13 is set when a site serves TLS 1.3 ShangMi, so that the
	// TLS hellos of a listener without one are not looked at for it.
	ServesTLS13 bool
}

// ForRequest returns the site that serves a request whose host is name
// (canonical, hostname.Host.Name; "" for an HTTP/1.0 request that names
// none) on a connection made for the site called connSite, or nil when
// the request is misdirected and is answered 421.
//
// The host chooses a site as a server name does: an exact name, the
// longest wildcard, then the default site. So on the default site's
// connection a host that no site lists is served by the default site, as
// nginx's default_server serves it: a client that connects by address
// (Host: 10.0.0.5) or by a name the operator did not list reaches the
// routes of the site whose handshake it passed, and no other. A host that
// another site lists is never served on this connection, and on another
// site's connection neither is a host no site lists.
func (t *SiteTable) ForRequest(name, connSite string) *Site {
	if s := t.All.Lookup(name); s != nil && s.Name == connSite {
		return s
	}
	return nil
}

func NewSiteTable(sites []*Site) *SiteTable {
	return &SiteTable{
		Sites: sites,
		All:   NewSiteIndex(sites, func(*Site) bool { return true }),
		TLCP:  NewSiteIndex(sites, func(s *Site) bool { return s.TLCP != nil }),
		TLS:   NewSiteIndex(sites, func(s *Site) bool { return s.TLS != nil }),

		ServesTLS13: slices.ContainsFunc(sites, func(s *Site) bool { return s.TLS13 != nil }),
	}
}

// Misdirected is the body of the 421 answer to a request for host (a
// canonical name) on a connection made for another site (connSite) over
// protocol (ConnInfo.Protocol: tlcp, or a TLS version). A request for a
// site that has no identity in the connection's protocol cannot be
// served on a new connection of that protocol either: the client needs
// the other protocol, and is told so.
func (t *SiteTable) Misdirected(host, connSite, protocol string) string {
	s := t.All.Lookup(host)
	tlcpConn := protocol == "tlcp"
	switch {
	case s != nil && tlcpConn && s.TLCP == nil:
		return host + " is not served over TLCP, only over TLS (its site " + s.Name + " has no tlcp identity); this TLCP connection was made for site " + connSite
	case s != nil && protocol == "tls1.3-sm" && s.TLS13 == nil:
		// edge.ProtocolTLS13SM: the site has no SM2 identity for it.
		return host + " is not served over TLS 1.3 ShangMi (its site " + s.Name + " has no SM2 identity: neither tls.sm2 nor a tlcp section, or tls13_shangmi: off); this TLS 1.3 ShangMi connection was made for site " + connSite
	case s != nil && protocol == "tls1.3-sm":
		return "this connection was made for another site; open a new one to " + host
	case s != nil && !tlcpConn && s.TLS == nil:
		return host + " is not served over TLS, only over TLCP (its site " + s.Name + " has no tls identity); this TLS connection was made for site " + connSite
	}
	return "this connection was made for another site; open a new one to " + host
}

// errUnknownSite is the cause of a handshake whose server name no site
// serves, on a listener without a default site.
type ErrUnknownSite struct{ Name string }

func (e *ErrUnknownSite) Error() string {
	if e.Name == "" {
		return "the client sent no server name and no site is the default"
	}
	return fmt.Sprintf("no site serves %q and none is the default", e.Name)
}

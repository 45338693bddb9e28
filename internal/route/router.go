package route

import (
	"net/http"
	"strings"

	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/upstream"
)

// routeEntry is a compiled config.Route.
type RouteEntry struct {
	Host     string // canonical (hostname.Pattern); "" any; "*.x" wildcard
	Path     string
	Upstream *upstream.Pool
	// stream routes take whole connections.
	Stream bool
}

// router picks the route for a host and path: an exact host before a
// wildcard before any host, then the longest path prefix.
type Router struct {
	Routes []RouteEntry
}

func hostRank(pattern, name string) int {
	switch {
	case pattern == "":
		return 1
	case !hostname.Match(pattern, name):
		return 0
	case strings.HasPrefix(pattern, "*"):
		return 2
	}
	return 3
}

// match returns the route for a canonical host name (hostname.Host.Name, or
// what hostname.ParseServerName returns for a stream route: the name that
// chose the site), nil when none matches.
func (r *Router) Match(name, path string, tcp bool) *RouteEntry {
	var best *RouteEntry
	bestRank := 0
	for i := range r.Routes {
		rt := &r.Routes[i]
		if rt.Stream != tcp {
			continue
		}
		rank := hostRank(rt.Host, name)
		if rank == 0 || !strings.HasPrefix(path, rt.Path) {
			continue
		}
		if best == nil || rank > bestRank || rank == bestRank && len(rt.Path) > len(best.Path) {
			best, bestRank = rt, rank
		}
	}
	return best
}

// requestHost is the host a request names, valid and canonical: its Host
// header, its :authority over HTTP/2, or the host of its absolute-form
// target (net/http puts each in r.Host). An HTTP/1.0 request may name
// none (the zero Host: the default site, routes for any host); ok is
// false for a host that is not a valid host[:port] (hostname.ParseAuthority).
func RequestHost(r *http.Request) (h hostname.Host, ok bool) {
	if r.Host == "" {
		return hostname.Host{}, r.ProtoMajor == 1
	}
	return hostname.ParseAuthority(r.Host)
}

// HostConflict reports whether an HTTP/2 request carries a Host header
// that names another host than its :authority, or several Host headers:
// RFC 9113 §8.3.1 has a server treat it as malformed, and nginx answers
// 400. Go's HTTP/2 server takes :authority and leaves Host in the
// header, so the site and route would be chosen by one name while an
// application behind that reads Host saw the other. The two are compared
// in canonical form (case and a trailing dot do not count; a port does).
// h is the request's host (RequestHost).
func HostConflict(r *http.Request, h hostname.Host) bool {
	if r.ProtoMajor != 2 {
		return false
	}
	hosts := r.Header["Host"]
	switch len(hosts) {
	case 0:
		return false
	case 1:
		other, ok := hostname.ParseAuthority(hosts[0])
		return !ok || other.Authority != h.Authority
	}
	return true
}

// hasDotSegment reports whether a request's path (decoded: %2e%2e is
// "..") has a "." or ".." segment. Routes match path prefixes, and an
// upstream that resolves such a segment would serve "/public/../admin",
// which matched the route of /public/, as /admin. Backslashes count as
// slashes and a segment's ";..." is ignored, as some servers (IIS,
// Tomcat) take them. Browsers and HTTP libraries resolve these segments
// before they send a request.
func HasDotSegment(p string) bool {
	if !strings.Contains(p, "/.") && !strings.Contains(p, "\\.") {
		return false
	}
	for len(p) > 0 {
		i := strings.IndexAny(p, "/\\")
		seg := p
		if i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

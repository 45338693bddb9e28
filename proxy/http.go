package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gmgate/gmgate/internal/forward"

	"github.com/gmgate/gmgate/internal/upstream"

	"github.com/gmgate/gmgate/internal/observe"

	"github.com/gmgate/gmgate/internal/route"
)

// routeEntry is a compiled config.Route.
type routeEntry struct {
	host     string // canonical (route.Pattern); "" any; "*.x" wildcard
	path     string
	upstream *upstream.Pool
	// stream routes take whole connections.
	stream bool
}

// router picks the route for a host and path: an exact host before a
// wildcard before any host, then the longest path prefix.
type router struct {
	routes []routeEntry
}

func hostRank(pattern, name string) int {
	switch {
	case pattern == "":
		return 1
	case !route.Match(pattern, name):
		return 0
	case strings.HasPrefix(pattern, "*"):
		return 2
	}
	return 3
}

// match returns the route for a canonical host name (route.Host.Name, or
// what route.ParseServerName returns for a stream route: the name that
// chose the site), nil when none matches.
func (r *router) match(name, path string, tcp bool) *routeEntry {
	var best *routeEntry
	bestRank := 0
	for i := range r.routes {
		rt := &r.routes[i]
		if rt.stream != tcp {
			continue
		}
		rank := hostRank(rt.host, name)
		if rank == 0 || !strings.HasPrefix(path, rt.path) {
			continue
		}
		if best == nil || rank > bestRank || rank == bestRank && len(rt.path) > len(best.path) {
			best, bestRank = rt, rank
		}
	}
	return best
}

// requestHost is the host a request names, valid and canonical: its Host
// header, its :authority over HTTP/2, or the host of its absolute-form
// target (net/http puts each in r.Host). An HTTP/1.0 request may name
// none (the zero Host: the default site, routes for any host); ok is
// false for a host that is not a valid host[:port] (route.ParseAuthority).
func requestHost(r *http.Request) (h route.Host, ok bool) {
	if r.Host == "" {
		return route.Host{}, r.ProtoMajor == 1
	}
	return route.ParseAuthority(r.Host)
}

// httpHandler serves the requests of one listener.
type httpHandler struct {
	srv      *Server
	listener *runningListener
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.srv.inflight.Add(1)
	defer h.srv.inflight.Done()
	start := time.Now()
	st := h.listener.state.Load()
	ci := forward.InfoFrom(r.Context())
	rec := &forward.Recorder{ResponseWriter: w}
	if r.ProtoMajor == 2 && st.idle > 0 {
		rec.Stall.W, rec.Stall.Timeout = w, st.idle
		defer rec.Stall.Finish()
	}
	forward.DropH2CUpgrade(r.Header)
	if ci.AmbiguousFraming.Swap(false) {
		rec.CloseConn = true
	}
	if r.Body != nil && r.Body != http.NoBody {
		// The pool tells a client's body failure from its own through
		// the request's context: HTTP/2 serves several requests of a
		// connection at once.
		body := forward.NewRequestBody(r.Body, w, st.requestBody)
		body.MinRate = st.requestBodyMinRate
		r = r.WithContext(context.WithValue(r.Context(), forward.RequestBodyKey{}, body))
		r.Body = body
		body.Http1 = r.ProtoMajor == 1
		rec.Body = body
		if r.ProtoMajor == 1 {
			defer body.BoundUnread()
		}
	}
	// The host is checked, and put in its canonical form, before
	// anything looks it up: the site, the route, the upstream (which
	// receives it) and the access log all see the one name.
	host, hostOK := requestHost(r)
	var site *site
	if hostOK {
		r.Host = host.Authority
		// The site the host names must be the one the connection's
		// handshake chose: its certificate and client authentication
		// are what the client passed.
		site = st.sites.all.lookup(host.Name)
	}
	var rt *routeEntry
	switch {
	case r.ProtoMajor == 2 && r.Host == "":
		// Malformed (RFC 9113 §8.3.1), as an HTTP/1.1 request without
		// Host is, which net/http answers 400.
		forward.PlainError(rec, http.StatusBadRequest, "the request names no host (:authority or Host)")
	case !hostOK:
		// net/http checks the characters of an HTTP/1 Host, not its
		// form ("pay.example.cn:1:2"), and Go's HTTP/2 server takes
		// any :authority. A host that is not one would match no site,
		// fall to the default site, and reach an upstream that reads
		// it otherwise (as pay.example.cn).
		forward.PlainError(rec, http.StatusBadRequest, "the host (Host, :authority or the request target) is not a valid host[:port]")
	case st.plain != nil && st.plain.intercept(rec, r, host):
	case site == nil || site.name != ci.Site:
		forward.PlainError(rec, http.StatusMisdirectedRequest, "this connection was made for another site; open a new one to "+host.Name)
	case hasDotSegment(r.URL.Path):
		forward.PlainError(rec, http.StatusBadRequest, "the path has a . or .. segment; send it resolved")
	default:
		rt = site.router.match(host.Name, r.URL.Path, false)
		if rt == nil {
			forward.PlainError(rec, http.StatusNotFound, "no route for this host and path")
		}
	}
	upstreamName := ""
	// Deferred, so that a request whose response was cut off midway (the
	// client went away, the upstream broke off: forward and ReverseProxy
	// then panic with http.ErrAbortHandler to end the connection) is
	// timed and logged too, with what was sent.
	defer func() { h.finished(st, ci, site, r, rec, upstreamName, start) }()
	if rt != nil {
		upstreamName = rt.upstream.Name
		if forward.Forwardable(r) {
			h.srv.fwd.Forward(rec, r, rt.upstream, site.forwarding)
		} else {
			rp := h.srv.fwd.ReverseProxy(rt.upstream, site.forwarding)
			rp.ModifyResponse = rec.NoteTarget
			rp.ServeHTTP(rec, r)
		}
	}
}

// finished writes a request's duration metric and access log line.
func (h *httpHandler) finished(st *listenerState, ci *forward.ConnInfo, site *site, r *http.Request, rec *forward.Recorder, upstreamName string, start time.Time) {
	d := time.Since(start)
	v := 0
	if r.ProtoMajor == 2 {
		v = 1
	}
	if site != nil && site.name == ci.Site {
		site.requests[v].Observe(d.Seconds())
	} else {
		h.srv.metrics.RequestDuration.WithLabelValues(st.name, ci.Site, httpVersions[v]).Observe(d.Seconds())
	}
	if a := h.srv.access; a != nil {
		a.Request(ci, &observe.RequestLine{
			Proto:     r.Proto,
			Method:    r.Method,
			Host:      r.Host,
			Path:      r.URL.Path,
			Status:    rec.Status(),
			Bytes:     rec.Bytes,
			Upstream:  upstreamName,
			Target:    rec.Target,
			UserAgent: r.UserAgent(),
			Duration:  d,
		})
	}
}

// hasDotSegment reports whether a request's path (decoded: %2e%2e is
// "..") has a "." or ".." segment. Routes match path prefixes, and an
// upstream that resolves such a segment would serve "/public/../admin",
// which matched the route of /public/, as /admin. Backslashes count as
// slashes and a segment's ";..." is ignored, as some servers (IIS,
// Tomcat) take them. Browsers and HTTP libraries resolve these segments
// before they send a request.
func hasDotSegment(p string) bool {
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

package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/route"
)

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
	host, hostOK := route.RequestHost(r)
	var site *route.Site
	if hostOK {
		r.Host = host.Authority
		// The site the host names must be the one the connection's
		// handshake chose: its certificate and client authentication
		// are what the client passed.
		site = st.sites.ForRequest(host.Name, ci.Site)
	}
	var rt *route.RouteEntry
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
	case route.HostConflict(r, host):
		forward.PlainError(rec, http.StatusBadRequest, "the Host header names another host than :authority")
	case st.plain != nil && st.plain.intercept(rec, r, host):
	case site == nil:
		forward.PlainError(rec, http.StatusMisdirectedRequest, st.sites.Misdirected(host.Name, ci.Site, ci.Protocol))
	case route.HasDotSegment(r.URL.Path):
		forward.PlainError(rec, http.StatusBadRequest, "the path has a . or .. segment; send it resolved")
	default:
		rt = site.Router.Match(host.Name, r.URL.Path, false)
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
		upstreamName = rt.Upstream.Name
		if rec.Body != nil {
			rec.Body.Forwarding()
		}
		if forward.Forwardable(r) {
			h.srv.fwd.Forward(rec, r, rt.Upstream, site.Forwarding)
		} else {
			rp := h.srv.fwd.ReverseProxy(rt.Upstream, site.Forwarding)
			rp.ModifyResponse = rec.NoteTarget
			rp.ServeHTTP(rec, r)
		}
	}
}

// finished writes a request's duration metric and access log line.
func (h *httpHandler) finished(st *listenerState, ci *forward.ConnInfo, site *route.Site, r *http.Request, rec *forward.Recorder, upstreamName string, start time.Time) {
	d := time.Since(start)
	v := 0
	if r.ProtoMajor == 2 {
		v = 1
	}
	h.srv.metrics.Request(ci.Site, ci.Protocol, ci.Suite)
	if site != nil && site.Name == ci.Site {
		site.Requests[v].Observe(d.Seconds())
	} else {
		h.srv.metrics.RequestDuration.WithLabelValues(st.name, ci.Site, route.HTTPVersions[v]).Observe(d.Seconds())
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

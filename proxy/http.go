package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/internal/upstream"

	"github.com/gmgate/gmgate/internal/forward"

	"github.com/gmgate/gmgate/internal/observe"

	"github.com/gmgate/gmgate/internal/route"
	"golang.org/x/net/http/httpguts"
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
	rec := &recorder{ResponseWriter: w}
	if r.ProtoMajor == 2 && st.idle > 0 {
		rec.stall.w, rec.stall.timeout = w, st.idle
		defer rec.stall.finish()
	}
	dropH2CUpgrade(r.Header)
	if ci.AmbiguousFraming.Swap(false) {
		rec.closeConn = true
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
		rec.body = body
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
		plainError(rec, http.StatusBadRequest, "the request names no host (:authority or Host)")
	case !hostOK:
		// net/http checks the characters of an HTTP/1 Host, not its
		// form ("pay.example.cn:1:2"), and Go's HTTP/2 server takes
		// any :authority. A host that is not one would match no site,
		// fall to the default site, and reach an upstream that reads
		// it otherwise (as pay.example.cn).
		plainError(rec, http.StatusBadRequest, "the host (Host, :authority or the request target) is not a valid host[:port]")
	case st.plain != nil && st.plain.intercept(rec, r, host):
	case site == nil || site.name != ci.Site:
		plainError(rec, http.StatusMisdirectedRequest, "this connection was made for another site; open a new one to "+host.Name)
	case hasDotSegment(r.URL.Path):
		plainError(rec, http.StatusBadRequest, "the path has a . or .. segment; send it resolved")
	default:
		rt = site.router.match(host.Name, r.URL.Path, false)
		if rt == nil {
			plainError(rec, http.StatusNotFound, "no route for this host and path")
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
		if forwardable(r) {
			h.srv.forward(rec, r, rt.upstream, site)
		} else {
			rp := h.srv.reverseProxy(rt.upstream, site)
			rp.ModifyResponse = rec.noteTarget
			rp.ServeHTTP(rec, r)
		}
	}
}

// finished writes a request's duration metric and access log line.
func (h *httpHandler) finished(st *listenerState, ci *forward.ConnInfo, site *site, r *http.Request, rec *recorder, upstreamName string, start time.Time) {
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
			Status:    rec.status(),
			Bytes:     rec.bytes,
			Upstream:  upstreamName,
			Target:    rec.target,
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

// reverseProxy builds the forwarding handler of a pool for a site's
// session headers. It is cheap: the pool holds the transport.
func (s *Server) reverseProxy(p *upstream.Pool, site *site) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { rewrite(pr, site) },
		Transport: p,
		// Responses of unknown length (streams, server-sent events) are
		// flushed on every write by ReverseProxy itself; others go out
		// through the server's buffer.
		BufferPool: copyBuffers,
		ErrorLog:   s.stdErrorLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.upstreamFailed(w, r, p, err)
		},
	}
}

// rewrite is the one place an inbound request becomes the outbound one.
// ReverseProxy has already removed hop-by-hop headers and any
// X-Forwarded-* and Forwarded headers the client sent.
func rewrite(pr *httputil.ProxyRequest, site *site) {
	forward.RemoveSpoofable(pr.Out.Header, site.forwarding.Spoofable)
	pr.Out.URL.Scheme = "http"
	pr.Out.Host = pr.In.Host
	// The trailer the client sends after its body: ReverseProxy's copy
	// is made before the body is read, and would go out with no values;
	// the body fills them in when it ends (requestBody.forwardTrailer).
	pr.Out.Trailer = nil
	if b, _ := pr.In.Context().Value(forward.RequestBodyKey{}).(*forward.RequestBody); b != nil {
		pr.Out.Trailer = b.ForwardTrailer(pr.In.Trailer, site.forwarding.Spoofable)
	}
	site.forwarding.Apply(pr.Out.Header, pr.In, forward.InfoFrom(pr.In.Context()))
}

// bufferPool recycles the body copy buffers of ReverseProxy, which would
// otherwise allocate 32 KiB per request.
type bufferPool struct{ p sync.Pool }

var copyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }

// upstreamFailed answers a request that got no response: 503 when no
// target is in service, 504 when the upstream timed out, 502 otherwise,
// with a short plain body, and logs which upstream failed and why (a few
// lines a second per upstream). A request whose client broke or let idle
// its own body is the client's failure: 400 or 408, and an HTTP/1
// connection is closed; one whose client went away is logged as 499 and nothing is
// sent.
func (s *Server) upstreamFailed(w http.ResponseWriter, r *http.Request, p *upstream.Pool, err error) {
	var be *forward.ClientBodyError
	if errors.As(err, &be) {
		status := be.Status()
		s.log.Debug("request body failed", "upstream", p.Name, "status", status, "cause", be.Err.Error(), "path", r.URL.Path)
		if status == forward.StatusClientClosed {
			abort(w)
			return
		}
		if rec, ok := w.(*recorder); ok && r.ProtoMajor == 1 {
			// What is left of an HTTP/1 body stands in the way of the
			// next request; over HTTP/2 the failure ends the stream
			// alone, and the connection goes on carrying the others.
			rec.closeConn = true
		}
		what := "the request body is not valid HTTP"
		if status == http.StatusRequestTimeout {
			what = "the request body did not arrive in time"
		}
		plainError(w, status, what)
		return
	}
	if r.Context().Err() != nil {
		s.log.Debug("client gone before the upstream answered", "upstream", p.Name, "path", r.URL.Path)
		abort(w)
		return
	}
	status, what := classifyUpstreamError(err)
	target := ""
	var ue *upstream.UpstreamError
	if errors.As(err, &ue) {
		target = ue.Target
		err = ue.Err
	}
	if rec, ok := w.(*recorder); ok {
		rec.target = target
	}
	p.FailLog.Log("upstream failed", failureAttrs(p, err, slog.String("target", target), slog.Int("status", status),
		slog.String("method", r.Method), slog.String("host", r.Host), slog.String("path", r.URL.Path))...)
	plainError(w, status, what)
}

// failureAttrs are the log fields of a failure to reach an upstream: the
// step that failed and why (the labels of gmgate_upstream_failures_total),
// a hint where the label alone may puzzle, and the cause.
func failureAttrs(p *upstream.Pool, err error, extra ...slog.Attr) []slog.Attr {
	attrs := []slog.Attr{slog.String("upstream", p.Name)}
	attrs = append(attrs, extra...)
	if !upstream.NoTargetFault(err) {
		stage, reason := upstream.UpstreamFailure(err)
		attrs = append(attrs, slog.String("stage", stage), slog.String("reason", reason))
		if hint := upstream.FailureHint(stage, reason); hint != "" {
			attrs = append(attrs, slog.String("hint", hint))
		}
	}
	return append(attrs, slog.String("cause", err.Error()))
}

// abort closes the connection of a request whose client has gone, without
// a response (net/http would otherwise send 200), and notes 499 for the
// access log.
func abort(w http.ResponseWriter) {
	if rec, ok := w.(*recorder); ok {
		rec.code = forward.StatusClientClosed
	}
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}

func classifyUpstreamError(err error) (int, string) {
	var ne net.Error
	switch {
	case errors.Is(err, upstream.ErrNoTarget):
		return http.StatusServiceUnavailable, "no upstream server is available"
	case errors.Is(err, upstream.ErrTargetBusy):
		return http.StatusServiceUnavailable, "the upstream server is busy"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return http.StatusGatewayTimeout, "the upstream server did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return http.StatusBadGateway, "the upstream server refused the connection"
	}
	return http.StatusBadGateway, "the upstream server failed"
}

func plainError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "%d %s: %s\n", status, http.StatusText(status), msg)
}

// recorder notes the status and body size of a response. It unwraps for
// http.ResponseController (flushing, hijacking for Upgrade).
type recorder struct {
	http.ResponseWriter
	code  int
	bytes int64
	// closeConn closes the client connection after this response.
	closeConn bool
	// target is the upstream address that answered (or failed).
	target string
	// stall bounds the writes of an HTTP/2 response (its w is nil for
	// HTTP/1, whose connection bounds its own: httpConn.Write).
	stall writeStall
	// body is the request's body (nil for none): what the response
	// writes keeps it from idling out while the client listens.
	body *forward.RequestBody
}

// noteTarget records which target answered; a ReverseProxy's
// ModifyResponse. A response that announces trailers loses its
// Content-Length (which an HTTP/2 upstream may send with them), so that
// an HTTP/1.1 client gets it chunked, the only framing that carries
// trailers there.
func (r *recorder) noteTarget(resp *http.Response) error {
	if resp.Request != nil {
		r.target = resp.Request.URL.Host
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if err := upgradeRefused(resp.Request.Header, resp.Header); err != nil {
				// ReverseProxy answers the client, but would leave the
				// upstream's connection open for good; an error here
				// closes it.
				return err
			}
		}
	}
	if len(resp.Trailer) > 0 && resp.ContentLength >= 0 {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return nil
}

// upgradeRefused is why a 101 response whose header is res cannot
// answer a request whose header is req: it switches to another protocol
// than the one asked for (ReverseProxy's checks), nil when it can.
func upgradeRefused(req, res http.Header) error {
	want, got := upgradeType(req), upgradeType(res)
	for i := 0; i < len(got); i++ {
		if got[i] < ' ' || got[i] > '~' {
			return fmt.Errorf("backend tried to switch to invalid protocol %q", got)
		}
	}
	if !strings.EqualFold(want, got) {
		return fmt.Errorf("backend tried to switch protocol %q when %q was requested", got, want)
	}
	return nil
}

// upgradeType is the protocol h offers or switches to, "" for none.
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

func (r *recorder) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		// An informational response (103 Early Hints) passed on from the
		// upstream: its hop-by-hop headers stay behind, as the final
		// response's do; in HTTP/2 they would make it malformed.
		removeHopByHop(r.Header())
	}
	if r.code == 0 && code >= 200 {
		r.code = code
		if r.closeConn {
			r.Header().Set("Connection", "close")
		}
		if r.body != nil && r.body.Streaming() {
			// The upstream answers while the client still sends (a
			// bidirectional stream, or an early answer): net/http
			// would otherwise read what is left of an HTTP/1 body
			// before it sends the header. The connection cannot be
			// used again before that body ends, so it is closed.
			_ = r.body.Ctl.EnableFullDuplex()
			if r.body.Http1 {
				r.Header().Set("Connection", "close")
			}
			r.body.Responded()
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.stall.w != nil {
		r.stall.start()
		defer r.stall.stop()
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	if r.body != nil && n > 0 {
		r.body.Responded()
	}
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if r.stall.w != nil {
			r.stall.start()
			defer r.stall.stop()
		}
		f.Flush()
	}
}

// writeStall gives up on an HTTP/2 response whose write has waited for
// the client longer than timeout (timeouts.idle), as httpConn.Write does
// for HTTP/1. A stream's writes wait for the client's flow-control
// window, which a client that stops taking the response never grants,
// while its connection stays busy and answers PINGs: the connection's
// write timeout never sees such a wait. The HTTP/2 server's own write
// deadline of a stream cannot serve, since it ends the stream at that
// time whether a write is waiting or not (a server-sent event stream
// may be quiet for long). Writes of one response do not overlap
// (ReverseProxy and forward flush under a lock of their own).
type writeStall struct {
	w       http.ResponseWriter
	timeout time.Duration

	mu    sync.Mutex
	timer *time.Timer
	// done is set when the handler returns; the response writer is not
	// touched after that.
	done bool
}

func (s *writeStall) start() {
	if s.timer == nil {
		s.timer = time.AfterFunc(s.timeout, s.expire)
		return
	}
	s.timer.Reset(s.timeout)
}

func (s *writeStall) stop() { s.timer.Stop() }

// expire ends the stream: a deadline in the past resets it at once, and
// the write waiting returns.
func (s *writeStall) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		_ = http.NewResponseController(s.w).SetWriteDeadline(time.Now().Add(-time.Second))
	}
}

func (s *writeStall) finish() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		// A hijacked connection (Upgrade) answered 101 itself.
		return http.StatusSwitchingProtocols
	}
	return r.code
}

package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/internal/upstream"
	"golang.org/x/net/http/httpguts"
)

// reverseProxy builds the forwarding handler of a pool for a site's
// session headers. It is cheap: the pool holds the transport.
func (f *Forwarder) ReverseProxy(p *upstream.Pool, policy *HeaderPolicy) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { rewrite(pr, policy) },
		Transport: p,
		// Responses of unknown length (streams, server-sent events) are
		// flushed on every write by ReverseProxy itself; others go out
		// through the server's buffer.
		BufferPool: copyBuffers,
		ErrorLog:   f.ErrorLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.upstreamFailed(w, r, p, err)
		},
	}
}

// rewrite is the one place an inbound request becomes the outbound one.
// ReverseProxy has already removed hop-by-hop headers and any
// X-Forwarded-* and Forwarded headers the client sent.
func rewrite(pr *httputil.ProxyRequest, policy *HeaderPolicy) {
	RemoveSpoofable(pr.Out.Header, policy.Spoofable)
	pr.Out.URL.Scheme = "http"
	pr.Out.Host = pr.In.Host
	// The trailer the client sends after its body: ReverseProxy's copy
	// is made before the body is read, and would go out with no values;
	// the body fills them in when it ends (requestBody.forwardTrailer).
	pr.Out.Trailer = nil
	if b, _ := pr.In.Context().Value(RequestBodyKey{}).(*RequestBody); b != nil {
		pr.Out.Trailer = b.ForwardTrailer(pr.In.Trailer, policy.Spoofable)
	}
	policy.Apply(pr.Out.Header, pr.In, InfoFrom(pr.In.Context()))
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
func (f *Forwarder) upstreamFailed(w http.ResponseWriter, r *http.Request, p *upstream.Pool, err error) {
	var be *ClientBodyError
	if errors.As(err, &be) {
		status := be.Status()
		f.Log.Debug("request body failed", "upstream", p.Name, "status", status, "cause", be.Err.Error(), "path", r.URL.Path)
		if status == StatusClientClosed {
			abort(w)
			return
		}
		if rec, ok := w.(*Recorder); ok && r.ProtoMajor == 1 {
			// What is left of an HTTP/1 body stands in the way of the
			// next request; over HTTP/2 the failure ends the stream
			// alone, and the connection goes on carrying the others.
			rec.CloseConn = true
		}
		what := "the request body is not valid HTTP"
		if status == http.StatusRequestTimeout {
			what = "the request body did not arrive in time"
		}
		PlainError(w, status, what)
		return
	}
	if r.Context().Err() != nil {
		f.Log.Debug("client gone before the upstream answered", "upstream", p.Name, "path", r.URL.Path)
		abort(w)
		return
	}
	status, what := ClassifyUpstreamError(err)
	target := ""
	var ue *upstream.Error
	if errors.As(err, &ue) {
		target = ue.Target
		err = ue.Err
	}
	if rec, ok := w.(*Recorder); ok {
		rec.Target = target
	}
	attrs := []slog.Attr{slog.String("target", target), slog.Int("status", status),
		slog.String("method", r.Method), slog.String("host", r.Host), slog.String("path", r.URL.Path)}
	if GRPCRequest(r) {
		code := grpcCode(status)
		attrs = append(attrs, slog.Int("grpc_status", code))
		p.FailLog.Log("upstream failed", FailureAttrs(p, err, attrs...)...)
		GRPCError(w, code, what)
		return
	}
	p.FailLog.Log("upstream failed", FailureAttrs(p, err, attrs...)...)
	PlainError(w, status, what)
}

// gRPC status codes of the failures gmgate answers itself.
const (
	grpcDeadlineExceeded = 4
	grpcUnavailable      = 14
)

// grpcCode is the gRPC status of an upstream failure answered with the
// HTTP status status, as gRPC maps HTTP statuses (and as Envoy answers
// them): a timeout is DEADLINE_EXCEEDED, anything else (no target, a
// full queue, a failed connection) UNAVAILABLE, which a client may retry.
func grpcCode(status int) int {
	if status == http.StatusGatewayTimeout {
		return grpcDeadlineExceeded
	}
	return grpcUnavailable
}

// GRPCRequest reports whether r is a gRPC call: its content type is
// application/grpc, alone or with a codec (+proto) or parameters. gRPC-Web
// (application/grpc-web) is not: its answers take another form.
func GRPCRequest(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// GRPCError answers a gRPC call that gmgate fails itself as a gRPC
// server would: HTTP 200, content type application/grpc, and the status
// in a trailers-only response (one HEADERS frame that ends the stream).
// A gRPC client reads an HTTP error status as UNAVAILABLE with "unexpected
// HTTP status code", which hides the cause and the difference between a
// timeout and an outage.
func GRPCError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(code))
	h.Set("Grpc-Message", grpcMessage(msg))
	w.WriteHeader(http.StatusOK)
}

// grpcMessage percent-encodes msg as grpc-message wants: every byte
// outside printable ASCII, and '%'.
func grpcMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < ' ' || c > '~' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// failureAttrs are the log fields of a failure to reach an upstream: the
// step that failed and why (the labels of gmgate_upstream_failures_total),
// a hint where the label alone may puzzle, and the cause.
func FailureAttrs(p *upstream.Pool, err error, extra ...slog.Attr) []slog.Attr {
	attrs := []slog.Attr{slog.String("upstream", p.Name)}
	attrs = append(attrs, extra...)
	if !upstream.NoTargetFault(err) {
		stage, reason := upstream.Failure(err)
		attrs = append(attrs, slog.String("stage", stage), slog.String("reason", reason))
		if hint := upstream.FailureHint(err); hint != "" {
			attrs = append(attrs, slog.String("hint", hint))
		}
	}
	return append(attrs, slog.String("cause", err.Error()))
}

// abort closes the connection of a request whose client has gone, without
// a response (net/http would otherwise send 200), and notes 499 for the
// access log.
func abort(w http.ResponseWriter) {
	if rec, ok := w.(*Recorder); ok {
		rec.code = StatusClientClosed
	}
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}

func ClassifyUpstreamError(err error) (int, string) {
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

func PlainError(w http.ResponseWriter, status int, msg string) {
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
type Recorder struct {
	http.ResponseWriter
	code  int
	Bytes int64
	// closeConn closes the client connection after this response.
	CloseConn bool
	// target is the upstream address that answered (or failed).
	Target string
	// stall bounds the writes of an HTTP/2 response (its w is nil for
	// HTTP/1, whose connection bounds its own: httpConn.Write).
	Stall writeStall
	// body is the request's body (nil for none): what the response
	// writes keeps it from idling out while the client listens.
	Body *RequestBody
}

// noteTarget records which target answered; a ReverseProxy's
// ModifyResponse. A response that announces trailers loses its
// Content-Length (which an HTTP/2 upstream may send with them), so that
// an HTTP/1.1 client gets it chunked, the only framing that carries
// trailers there.
func (r *Recorder) NoteTarget(resp *http.Response) error {
	if resp.Request != nil {
		r.Target = resp.Request.URL.Host
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

func (r *Recorder) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		// An informational response (103 Early Hints) passed on from the
		// upstream: its hop-by-hop headers stay behind, as the final
		// response's do; in HTTP/2 they would make it malformed.
		removeHopByHop(r.Header())
	}
	if r.code == 0 && code >= 200 {
		r.code = code
		if r.CloseConn {
			r.Header().Set("Connection", "close")
		}
		if r.Body != nil && r.Body.Streaming() {
			// The upstream answers while the client still sends (a
			// bidirectional stream, or an early answer): net/http
			// would otherwise read what is left of an HTTP/1 body
			// before it sends the header. The connection cannot be
			// used again before that body ends, so it is closed.
			_ = r.Body.Ctl.EnableFullDuplex()
			if r.Body.Http1 {
				r.Header().Set("Connection", "close")
			}
			r.Body.Responded()
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.Stall.W != nil {
		r.Stall.start()
		defer r.Stall.stop()
	}
	n, err := r.ResponseWriter.Write(b)
	r.Bytes += int64(n)
	if r.Body != nil && n > 0 {
		r.Body.Responded()
	}
	return n, err
}

func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if r.Stall.W != nil {
			r.Stall.start()
			defer r.Stall.stop()
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
	W       http.ResponseWriter
	Timeout time.Duration

	mu    sync.Mutex
	timer *time.Timer
	// done is set when the handler returns; the response writer is not
	// touched after that.
	done bool
}

func (s *writeStall) start() {
	if s.timer == nil {
		s.timer = time.AfterFunc(s.Timeout, s.expire)
		return
	}
	s.timer.Reset(s.Timeout)
}

func (s *writeStall) stop() { s.timer.Stop() }

// expire ends the stream: a deadline in the past resets it at once, and
// the write waiting returns.
func (s *writeStall) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		_ = http.NewResponseController(s.W).SetWriteDeadline(time.Now().Add(-time.Second))
	}
}

func (s *writeStall) Finish() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *Recorder) Status() int {
	if r.code == 0 {
		// A hijacked connection (Upgrade) answered 101 itself.
		return http.StatusSwitchingProtocols
	}
	return r.code
}

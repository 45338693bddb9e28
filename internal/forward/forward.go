package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
	"golang.org/x/net/http/httpguts"
)

// forwardable reports whether forward serves r: a request from an HTTP/1
// client without a body that does not ask to switch protocols. The
// others (bodies, upgrades such as WebSocket, HTTP/2 clients, CONNECT) go
// through httputil.ReverseProxy.
func Forwardable(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.Body == http.NoBody && r.Method != http.MethodConnect &&
		!httpguts.HeaderValuesContainsToken(r.Header["Connection"], "Upgrade")
}

// forwarder sends requests to their upstream and their answers back.
type Forwarder struct {
	Log *slog.Logger
	// ErrorLog takes what net/http and httputil log.
	ErrorLog *log.Logger
	// Metrics count TCP connections to upstreams; Access logs them
	// (nil when the access log is off).
	Metrics *observe.Metrics
	Access  *observe.AccessLog
}

// forward does for a request that forwardable takes what
// httputil.ReverseProxy does, with rewrite as its Rewrite hook and
// rec.noteTarget as its ModifyResponse, with less per request: the
// outbound header is built once from the inbound one instead of cloned
// and then pruned, and the response header is handed over instead of
// copied value by value. TestForwardMatchesReverseProxy sends the same
// requests and responses through both and compares what the upstream and
// the client see.
func (f *Forwarder) Forward(rec *Recorder, r *http.Request, p *upstream.Pool, policy *HeaderPolicy) {
	info := &informational{w: rec}
	ci := InfoFrom(r.Context())
	// The outbound request keeps the inbound one's context: the hooks
	// carry the informational responses and the watch of the client's
	// connection, which ends the exchange if the client goes away, in
	// place of an httptrace hook and an AfterFunc on a context of its
	// own.
	hooks := &upstream.Hooks{Watch: ci.Watch, Got1xx: info.got1xx}
	out := new(http.Request)
	*out = *r
	u := *r.URL
	u.RawQuery = cleanQuery(u.RawQuery)
	out.URL = &u
	out.Header = outboundHeader(r.Header)
	out.Body = nil
	out.Close = false
	RemoveSpoofable(out.Header, policy.Spoofable)
	out.URL.Scheme = "http"
	out.Host = r.Host
	policy.Apply(out.Header, r, ci)
	if _, ok := out.Header["User-Agent"]; !ok {
		// Not net/http's own User-Agent.
		out.Header["User-Agent"] = emptyValue
	}

	res, err := p.RoundTripWith(out, hooks)
	info.Finish()
	if err != nil {
		f.upstreamFailed(rec, out, p, err)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// The request asked for no protocol switch.
		_ = rec.NoteTarget(res)
		res.Body.Close()
		f.upstreamFailed(rec, out, p, switchError(res.Header))
		return
	}
	removeHopByHop(res.Header)
	_ = rec.NoteTarget(res)
	h := rec.Header()
	for k, vv := range res.Header {
		// The response writer's header is empty: the values need not be
		// copied one by one.
		h[k] = vv
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	rec.WriteHeader(res.StatusCode)
	if err := f.copyBody(rec, res); err != nil {
		defer res.Body.Close()
		// A response cut short can only be cut off: net/http closes the
		// client's connection and logs nothing.
		panic(http.ErrAbortHandler)
	}
	res.Body.Close()
	if len(res.Trailer) > 0 {
		// Chunked, so that the trailer can follow.
		rec.Flush()
	}
	if len(res.Trailer) == announced {
		for k, vv := range res.Trailer {
			for _, v := range vv {
				h.Add(k, v)
			}
		}
		return
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			h.Add(k, v)
		}
	}
}

// emptyValue is a header value that tells net/http to send no header.
var emptyValue = []string{""}

// outboundHeader is in without the hop-by-hop headers (those of hopByHop
// and those Connection names) and without the forwarding headers a
// client may not set, with "Te: trailers" when the client said it takes
// trailers: the header ReverseProxy makes before its Rewrite hook. The
// value slices are shared with in, and set anew, never appended to.
func outboundHeader(in http.Header) http.Header {
	out := make(http.Header, len(in)+8)
	for k, vv := range in {
		out[k] = vv
	}
	removeHopByHop(out)
	if httpguts.HeaderValuesContainsToken(in["Te"], "trailers") {
		out["Te"] = teTrailers
	}
	delete(out, KeyForwarded)
	delete(out, KeyXForwardedFor)
	delete(out, KeyXForwardedHost)
	delete(out, KeyXForwardedProto)
	return out
}

var teTrailers = []string{"trailers"}

// removeHopByHop removes from h the headers named in its Connection
// header and the hop-by-hop headers, as ReverseProxy does.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range HopByHop {
		delete(h, k)
	}
}

// dropH2CUpgrade takes a request's offer to upgrade to cleartext HTTP/2
// (Upgrade: h2c, RFC 7540 §3.2) out of its header, with the
// HTTP2-Settings that goes with it; other upgrades (WebSocket) stay.
// ReverseProxy would pass it on, and an upstream that takes it makes
// the connection a tunnel of HTTP/2 requests that gmgate does not read:
// past the routes, with headers of the client's own making. gmgate
// speaks HTTP/2 to clients by ALPN or prior knowledge only, so the
// request is served as the HTTP/1.1 one it also is, as RFC 9110 §7.8
// lets a server do.
func DropH2CUpgrade(h http.Header) {
	up := h["Upgrade"]
	if !httpguts.HeaderValuesContainsToken(up, "h2c") {
		return
	}
	var keep []string
	for _, v := range up {
		for p := range strings.SplitSeq(v, ",") {
			if p = textproto.TrimString(p); p != "" && !strings.EqualFold(p, "h2c") {
				keep = append(keep, p)
			}
		}
	}
	delete(h, "Http2-Settings")
	if len(keep) == 0 {
		delete(h, "Upgrade")
		return
	}
	h["Upgrade"] = []string{strings.Join(keep, ", ")}
}

// switchError is ReverseProxy's error for a 101 response to a request
// that asked for no protocol switch.
func switchError(h http.Header) error {
	up := ""
	if httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		up = h.Get("Upgrade")
	}
	if up == "" {
		return errors.New("internal error: 101 switching protocols response with non-writable body")
	}
	return fmt.Errorf("backend tried to switch protocol %q when %q was requested", up, "")
}

// copyBody copies the response body to the client, flushing after every
// write when its length is unknown or it is a stream of server-sent
// events, and otherwise through the server's buffer, as ReverseProxy does.
func (f *Forwarder) copyBody(rec *Recorder, res *http.Response) error {
	var w io.Writer = rec
	if res.ContentLength == -1 || eventStream(res.Header) {
		sw := &streamWriter{rec: rec, pending: true}
		// The header goes out soon even if the body is slow to come
		// (usually after the first write, as with ReverseProxy).
		sw.t = time.AfterFunc(0, sw.delayedFlush)
		defer sw.stop()
		w = sw
	}
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		nr, rerr := res.Body.Read(buf)
		if rerr != nil && rerr != io.EOF && rerr != context.Canceled {
			f.ErrorLog.Printf("httputil: ReverseProxy read error during body copy: %v", rerr)
		}
		if nr > 0 {
			nw, werr := w.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nw != nr {
				return io.ErrShortWrite
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// streamWriter flushes every write of a streamed response, and the
// header once soon after it was written.
type streamWriter struct {
	mu      sync.Mutex
	rec     *Recorder
	pending bool
	t       *time.Timer
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.rec.Write(p)
	w.rec.Flush()
	return n, err
}

func (w *streamWriter) delayedFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending {
		w.rec.Flush()
		w.pending = false
	}
}

func (w *streamWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = false
	w.t.Stop()
}

// eventStream reports whether a response is a stream of server-sent
// events, by its media type.
func eventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	if !containsFold(ct, "event-stream") {
		return false
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// informational passes 1xx responses to the client until the final
// response has come.
type informational struct {
	mu   sync.Mutex
	done bool
	w    http.ResponseWriter
}

func (in *informational) got1xx(code int, header textproto.MIMEHeader) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done {
		return nil
	}
	h := in.w.Header()
	for k, vv := range header {
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	in.w.WriteHeader(code)
	// WriteHeader does not clear them for a 1xx.
	clear(h)
	return nil
}

func (in *informational) Finish() {
	in.mu.Lock()
	in.done = true
	in.mu.Unlock()
}

// cleanQuery is ReverseProxy's cleanup of a query it forwards: a query
// url.ParseQuery would not take as it is (a semicolon, a bad escape, too
// many parameters) is parsed and encoded again, which drops what it
// cannot parse. Whether it always does that (GODEBUG=urlmaxqueryparams)
// is asked of ReverseProxy itself, once.
func cleanQuery(q string) string {
	if q == "" {
		return q
	}
	if alwaysReencode() || strings.Count(q, "&")+1 > 10000 || !plainQuery(q) {
		v, _ := url.ParseQuery(q)
		return v.Encode()
	}
	return q
}

func plainQuery(q string) bool {
	for i := 0; i < len(q); {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 3
		default:
			i++
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// alwaysReencode reports whether ReverseProxy encodes every query anew,
// which it does when GODEBUG sets urlmaxqueryparams.
var alwaysReencode = sync.OnceValue(func() bool {
	seen := ""
	rp := &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { seen = pr.Out.URL.RawQuery },
		Transport:    RoundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("probe") }),
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {},
	}
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/", RawQuery: "b=1&a=2"}, Header: http.Header{}, Host: "probe"}
	rp.ServeHTTP(discardResponse{}, req)
	return seen != "b=1&a=2"
})

// discardResponse is a ResponseWriter that keeps nothing.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}

type RoundTripFunc func(*http.Request) (*http.Response, error)

func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/h1client"
	"github.com/gmgate/gmgate/internal/observe"
)

// target is one address of an upstream pool with its health.
type Target struct {
	url  *url.URL
	Addr string // host:port
	// host is the Host header of the requests sent to the target ("":
	// the client's), from the upstream's host.
	host string

	Inflight atomic.Int64
	// slots bound the requests in flight to the target (nil: no bound,
	// for tcp:// targets).
	slots *TargetSlots
	// healthy is the active health checks' verdict.
	healthy atomic.Bool
	// fails counts consecutive failures on real traffic; ejectedUntil
	// (Unix nanoseconds) leaves the target out after too many.
	fails        atomic.Int32
	ejectedUntil atomic.Int64
	// checkFails and checkPasses count consecutive check results.
	checkFails, checkPasses int
	// drained and lastErr are for operators (view.go).
	drained atomic.Bool
	lastErr atomic.Pointer[targetError]
}

func (t *Target) Available(now time.Time) bool {
	return t.healthy.Load() && now.UnixNano() >= t.ejectedUntil.Load() && !t.drained.Load()
}

// selectionPolicy picks a target among the available ones.
type selectionPolicy interface {
	Pick(candidates []*Target) *Target
}

type RoundRobin struct{ next atomic.Uint64 }

func (p *RoundRobin) Pick(c []*Target) *Target {
	if len(c) == 0 {
		return nil
	}
	return c[(p.next.Add(1)-1)%uint64(len(c))]
}

// leastConn picks the target with the fewest requests in flight, taking
// turns among equals so that an idle pool still spreads its load.
type LeastConn struct{ next atomic.Uint64 }

func (p *LeastConn) Pick(c []*Target) *Target {
	if len(c) == 0 {
		return nil
	}
	start := int(p.next.Add(1) % uint64(len(c)))
	var best *Target
	for i := range c {
		t := c[(start+i)%len(c)]
		if best == nil || t.Inflight.Load() < best.Inflight.Load() {
			best = t
		}
	}
	return best
}

func newPolicy(name string) selectionPolicy {
	if name == config.PolicyLeastConn {
		return &LeastConn{}
	}
	return &RoundRobin{}
}

// errNoTarget means every target of a pool is down or ejected.
var ErrNoTarget = errors.New("no healthy target")

// upstreamFailed counts a request of upstream that failed with err: by
// step and reason unless it was never sent to a target.
func upstreamFailed(m *observe.Metrics, upstream string, err error) {
	if NoTargetFault(err) {
		m.UpstreamResult(upstream, 0, true, "", "")
		return
	}
	stage, reason := Failure(err)
	m.UpstreamResult(upstream, 0, true, stage, reason)
}

// noTargetFault reports whether err is a request the pool did not send:
// no target in service, or every connection to the target in use. Such a
// failure is nobody's doing, counted against no target.
func NoTargetFault(err error) bool {
	return errors.Is(err, ErrNoTarget) || errors.Is(err, ErrTargetBusy)
}

// pool is an upstream: targets, a selection policy, health checking and
// the transport that reaches them.
type Pool struct {
	Name    string
	Scheme  string // http, https, h2c, tlcp, tls13sm or tcp
	Cfg     config.Upstream
	Targets []*Target
	policy  selectionPolicy
	log     *slog.Logger
	metrics *observe.Metrics
	// counters are the pool's per-request metrics.
	counters *observe.UpstreamCounters

	Transport transport
	retries   int
	maxFails  int
	// panicThreshold is the share of targets in service (percent) under
	// which passive ejections are ignored; 0 for never.
	panicThreshold int
	panicking      atomic.Bool
	// failLog writes the per-request failure lines, a few a second.
	FailLog *observe.RateLimitedLog

	stop     context.CancelFunc
	stopped  chan struct{}
	Timeouts config.Timeouts
	// maxResponseHeader bounds a target's response header.
	MaxResponseHeader int
}

// newPool makes the pool of upstream name; store holds the client
// identities of tlcp:// upstreams (nil in tests that have none).
func NewPool(name string, uc *config.Upstream, timeouts config.Timeouts, maxResponseHeader int, store *certs.Store, offline bool, log *slog.Logger, m *observe.Metrics) (*Pool, error) {
	p := &Pool{
		Name:              name,
		Scheme:            uc.Scheme(),
		Cfg:               *uc,
		policy:            newPolicy(uc.Policy),
		log:               log.With("upstream", name),
		metrics:           m,
		counters:          observe.NewUpstreamCounters(m, name),
		Timeouts:          timeouts,
		MaxResponseHeader: maxResponseHeader,
	}
	if uc.Retries != nil {
		p.retries = *uc.Retries
	}
	if uc.Passive.MaxFails != nil {
		p.maxFails = *uc.Passive.MaxFails
	}
	if uc.Passive.PanicThreshold != nil {
		p.panicThreshold = *uc.Passive.PanicThreshold
	}
	p.FailLog = observe.NewRateLimitedLog(log, slog.LevelWarn, "upstream failures not logged", "upstream", name)
	for _, s := range uc.Targets {
		u, err := config.ParseTarget(s)
		if err != nil {
			return nil, err
		}
		addr := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" || u.Scheme == "tlcp" || u.Scheme == config.SchemeTLS13SM {
				port = "443"
			}
			addr = net.JoinHostPort(u.Hostname(), port)
		}
		t := &Target{url: u, Addr: addr, host: uc.Host}
		if uc.Host == config.UpstreamHostTarget {
			t.host = TargetHost(u)
		}
		t.healthy.Store(true)
		if uc.MaxConnsPerTarget != nil && p.Scheme != "tcp" {
			queue := 0
			if uc.QueueSize != nil {
				queue = *uc.QueueSize
			}
			t.slots = NewTargetSlots(*uc.MaxConnsPerTarget, queue, uc.QueueTimeout.D(), m, name, addr)
		}
		p.Targets = append(p.Targets, t)
	}
	ts := transportSettings{timeouts: timeouts, maxResponseHeader: maxResponseHeader, store: store, offline: offline}
	if uc.MaxConnsPerTarget != nil {
		ts.maxConnsPerTarget = *uc.MaxConnsPerTarget
	}
	tr, err := newTransport(p, uc, ts)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", name, err)
	}
	p.Transport = tr
	m.UpstreamHealthy.WithLabelValues(name).Set(float64(len(p.Targets)))
	return p, nil
}

// targetHost is the target u's host[:port] as a Host header names it:
// without the port when it is the scheme's default.
func TargetHost(u *url.URL) string {
	def := "80"
	if u.Scheme == "https" || u.Scheme == "tlcp" || u.Scheme == config.SchemeTLS13SM {
		def = "443"
	}
	if u.Port() != def {
		return u.Host
	}
	if h := u.Hostname(); strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return u.Hostname()
}

// filesUnchanged reports whether the files the pool's transport read at
// its start (a tlcp:// upstream's CA file) still hold the same, so that a
// reload may keep the pool.
func (p *Pool) FilesUnchanged() bool {
	if tr, ok := p.Transport.(interface{ FilesUnchanged() bool }); ok {
		return tr.FilesUnchanged()
	}
	return true
}

// close stops health checking and closes the idle upstream connections
// (a tlcp:// pool's others too, once their requests are done).
func (p *Pool) Close() {
	if p.stop != nil {
		p.stop()
		<-p.stopped
	}
	if tr, ok := p.Transport.(*tlcpTransport); ok {
		tr.Close()
		return
	}
	p.Transport.CloseIdle()
}

// pick chooses an available target not in tried. When fewer than
// panicThreshold percent of the targets are available, passive ejections
// are ignored (Envoy's panic mode): a pool whose targets all failed a few
// requests in a row, in a blip or a deploy, keeps trying them rather than
// answer 503 to everyone for eject_for. The active checks' verdict still
// holds.
func (p *Pool) Pick(tried []*Target) *Target {
	now := time.Now()
	available := 0
	for _, t := range p.Targets {
		if t.Available(now) {
			available++
		}
	}
	panicking := available*100 < p.panicThreshold*len(p.Targets)
	if panicking != p.panicking.Load() && p.panicking.CompareAndSwap(!panicking, panicking) {
		if panicking {
			p.log.Warn("upstream in panic mode: too few targets in service, ejected targets are used too", "in_service", available, "targets", len(p.Targets), "panic_threshold_percent", p.panicThreshold)
		} else {
			p.log.Info("upstream out of panic mode", "in_service", available, "targets", len(p.Targets))
		}
	}
	if available == len(p.Targets) && len(tried) == 0 {
		return p.policy.Pick(p.Targets)
	}
	cands := make([]*Target, 0, len(p.Targets))
	for _, t := range p.Targets {
		if !t.Available(now) && !(panicking && t.healthy.Load() && !t.drained.Load()) {
			continue
		}
		skip := false
		for _, x := range tried {
			if x == t {
				skip = true
				break
			}
		}
		if !skip {
			cands = append(cands, t)
		}
	}
	return p.policy.Pick(cands)
}

// upstreamError is a failure to get a response from a pool, with the
// target that failed (nil when none could be picked).
type Error struct {
	Pool   string
	Target string
	Err    error
}

func (e *Error) Error() string {
	if e.Target == "" {
		return "upstream " + e.Pool + ": " + e.Err.Error()
	}
	return "upstream " + e.Pool + " target " + e.Target + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// RoundTrip sends req to a target of the pool, retrying idempotent
// requests that could not be sent on other targets.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	return p.RoundTripWith(req, nil)
}

// Hooks are what a caller hands the pool besides a request: the watch of
// the client connection and the taker of informational responses. The
// HTTP/1.1 client of http:// targets uses them as they are; the other
// transports get the informational responses through an httptrace hook
// in the request's context, and see a client go away by that context.
type Hooks = h1client.Hooks

// traced is req with h's Got1xx as its httptrace Got1xxResponse hook,
// for the transports that take it from there; req itself without one.
func traced(req *http.Request, h *Hooks) *http.Request {
	if h == nil || h.Got1xx == nil {
		return req
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{Got1xxResponse: h.Got1xx}))
}

// RoundTripWith is RoundTrip with hooks (nil: none).
func (p *Pool) RoundTripWith(req *http.Request, h *Hooks) (*http.Response, error) {
	var triedBuf [4]*Target
	tried := triedBuf[:0]
	var lastErr, busy error
	client := req.Context().Value(ClientKey{})
	// next is the target a retry chose, nil to pick one.
	var next *Target
	for attempt := 0; ; attempt++ {
		t := next
		next = nil
		if t == nil {
			t = p.Pick(tried)
		}
		if t == nil {
			if lastErr != nil {
				// Every other target was tried; the last failure stands.
				return nil, lastErr
			}
			if busy != nil {
				upstreamFailed(p.metrics, p.Name, busy)
				return nil, busy
			}
			upstreamFailed(p.metrics, p.Name, ErrNoTarget)
			return nil, &Error{Pool: p.Name, Err: ErrNoTarget}
		}
		tried = append(tried, t)
		if t.slots != nil {
			if err := t.slots.Acquire(req.Context(), client); err != nil {
				if req.Context().Err() != nil {
					return nil, err
				}
				busy = &Error{Pool: p.Name, Target: t.Addr, Err: err}
				var be *TargetBusyError
				if errors.As(err, &be) && !be.TimedOut {
					// A full queue answers at once: another target may
					// have room. Not an attempt.
					attempt--
					continue
				}
				if lastErr == nil {
					upstreamFailed(p.metrics, p.Name, busy)
					return nil, busy
				}
				return nil, lastErr
			}
		}
		out := req
		if attempt > 0 {
			out = req.Clone(req.Context())
		}
		if t.host != "" {
			if out == req {
				// The caller's request keeps the client's Host (its
				// failure is logged with it).
				r := *req
				out = &r
			}
			out.Host = t.host
		}
		t.Inflight.Add(1)
		start := time.Now()
		resp, err := p.Transport.roundTrip(out, t, h)
		t.Inflight.Add(-1)
		if t.slots != nil {
			if err == nil {
				holdUntilClosed(resp, func() { t.slots.Release(client) })
			} else {
				t.slots.Release(client)
			}
		}
		if err == nil {
			p.succeeded(t)
			p.counters.Responded(p.metrics, p.Name, resp.StatusCode)
			p.counters.Duration.Observe(time.Since(start).Seconds())
			return resp, nil
		}
		if be := clientBodyFailure(req); be != nil {
			// The client broke its own request body: no fault of the
			// target, and nothing to retry.
			return nil, be
		}
		if req.Context().Err() != nil {
			// The client went away: nothing to count against the
			// target, nobody to answer.
			return nil, err
		}
		upstreamFailed(p.metrics, p.Name, err)
		p.failed(t, err)
		lastErr = &Error{Pool: p.Name, Target: t.Addr, Err: err}
		if attempt < p.retries && notSent(err) && Retryable(req) && req.Context().Err() == nil {
			// The next target is chosen before the retry is announced:
			// on a pool of one, or once every target was tried, there is
			// none, and this failure stands.
			if next = p.Pick(tried); next == nil {
				return nil, lastErr
			}
			p.log.Debug("retrying on another target", "target", t.Addr, "next", next.Addr, "cause", err.Error())
			continue
		}
		return nil, lastErr
	}
}

// notSent reports whether err happened before any byte of the request
// left: a failed dial (refused, unreachable, timed out connecting) or a
// failed TLCP handshake.
func notSent(err error) bool {
	var se *stageError
	if errors.As(err, &se) {
		return se.stage == stageConnect || se.stage == stageHandshake
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryable reports whether a request may be sent again: idempotent by
// method and with no body that was already consumed.
func Retryable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// dialTCP connects to a target of a tcp pool, trying others when a
// connection fails, up to retries times.
func (p *Pool) DialTCP(ctx context.Context) (net.Conn, *Target, error) {
	var tried []*Target
	var lastErr error
	for attempt := 0; attempt <= p.retries; attempt++ {
		t := p.Pick(tried)
		if t == nil {
			break
		}
		tried = append(tried, t)
		c, err := p.Transport.dialStream(ctx, t)
		if err == nil {
			p.succeeded(t)
			return c, t, nil
		}
		lastErr = &Error{Pool: p.Name, Target: t.Addr, Err: err}
		upstreamFailed(p.metrics, p.Name, err)
		if ctx.Err() != nil {
			break
		}
		p.failed(t, err)
	}
	if lastErr == nil {
		lastErr = &Error{Pool: p.Name, Err: ErrNoTarget}
		upstreamFailed(p.metrics, p.Name, ErrNoTarget)
	}
	return nil, nil, lastErr
}

// ClientKey is the context key of a request's client connection (its
// value is the connection's description): requests of one client share
// its per-target slots fairly with other clients' (targetslots.go).
type ClientKey struct{}

// BodyKey is the context key of a request's ClientBody.
type BodyKey struct{}

// ClientBody is a request body that knows when it, not the upstream,
// made a request fail: a client that broke off or let its upload idle.
type ClientBody interface {
	// Failure returns the client's error behind a failed request, or nil;
	// canceled says the request's context was canceled.
	Failure(canceled bool) error
}

// clientBodyFailure returns the client's body error behind a failed
// upstream request, or nil when the request body is not at fault.
// (ReverseProxy hands the pool the body in a wrapper of its own, so it
// is found through the request context.)
func clientBodyFailure(r *http.Request) error {
	if b, _ := r.Context().Value(BodyKey{}).(ClientBody); b != nil {
		// A canceled request means a failed or closed client
		// connection, so a read in flight returns at once.
		return b.Failure(r.Context().Err() != nil)
	}
	return nil
}

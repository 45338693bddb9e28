package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/internal/forward"

	"github.com/gmgate/gmgate/internal/observe"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
)

// target is one address of an upstream pool with its health.
type target struct {
	url  *url.URL
	addr string // host:port
	// host is the Host header of the requests sent to the target ("":
	// the client's), from the upstream's host.
	host string

	inflight atomic.Int64
	// slots bound the requests in flight to the target (nil: no bound,
	// for tcp:// targets).
	slots *targetSlots
	// healthy is the active health checks' verdict.
	healthy atomic.Bool
	// fails counts consecutive failures on real traffic; ejectedUntil
	// (Unix nanoseconds) leaves the target out after too many.
	fails        atomic.Int32
	ejectedUntil atomic.Int64
	// checkFails and checkPasses count consecutive check results.
	checkFails, checkPasses int
}

func (t *target) available(now time.Time) bool {
	return t.healthy.Load() && now.UnixNano() >= t.ejectedUntil.Load()
}

// selectionPolicy picks a target among the available ones.
type selectionPolicy interface {
	pick(candidates []*target) *target
}

type roundRobin struct{ next atomic.Uint64 }

func (p *roundRobin) pick(c []*target) *target {
	if len(c) == 0 {
		return nil
	}
	return c[(p.next.Add(1)-1)%uint64(len(c))]
}

// leastConn picks the target with the fewest requests in flight, taking
// turns among equals so that an idle pool still spreads its load.
type leastConn struct{ next atomic.Uint64 }

func (p *leastConn) pick(c []*target) *target {
	if len(c) == 0 {
		return nil
	}
	start := int(p.next.Add(1) % uint64(len(c)))
	var best *target
	for i := range c {
		t := c[(start+i)%len(c)]
		if best == nil || t.inflight.Load() < best.inflight.Load() {
			best = t
		}
	}
	return best
}

func newPolicy(name string) selectionPolicy {
	if name == config.PolicyLeastConn {
		return &leastConn{}
	}
	return &roundRobin{}
}

// errNoTarget means every target of a pool is down or ejected.
var errNoTarget = errors.New("no healthy target")

// upstreamFailed counts a request of upstream that failed with err: by
// step and reason unless it was never sent to a target.
func upstreamFailed(m *observe.Metrics, upstream string, err error) {
	if noTargetFault(err) {
		m.UpstreamResult(upstream, 0, true, "", "")
		return
	}
	stage, reason := upstreamFailure(err)
	m.UpstreamResult(upstream, 0, true, stage, reason)
}

// noTargetFault reports whether err is a request the pool did not send:
// no target in service, or every connection to the target in use. Such a
// failure is nobody's doing, counted against no target.
func noTargetFault(err error) bool {
	return errors.Is(err, errNoTarget) || errors.Is(err, errTargetBusy)
}

// pool is an upstream: targets, a selection policy, health checking and
// the transport that reaches them.
type pool struct {
	name    string
	scheme  string // http, https, h2c, tlcp or tcp
	cfg     config.Upstream
	targets []*target
	policy  selectionPolicy
	log     *slog.Logger
	metrics *observe.Metrics
	// counters are the pool's per-request metrics.
	counters *observe.UpstreamCounters

	transport transport
	retries   int
	maxFails  int
	// panicThreshold is the share of targets in service (percent) under
	// which passive ejections are ignored; 0 for never.
	panicThreshold int
	panicking      atomic.Bool
	// failLog writes the per-request failure lines, a few a second.
	failLog *observe.RateLimitedLog

	stop     context.CancelFunc
	stopped  chan struct{}
	timeouts config.Timeouts
	// maxResponseHeader bounds a target's response header.
	maxResponseHeader int
}

// newPool makes the pool of upstream name; store holds the client
// identities of tlcp:// upstreams (nil in tests that have none).
func newPool(name string, uc *config.Upstream, timeouts config.Timeouts, maxResponseHeader int, store *certs.Store, offline bool, log *slog.Logger, m *observe.Metrics) (*pool, error) {
	p := &pool{
		name:              name,
		scheme:            uc.Scheme(),
		cfg:               *uc,
		policy:            newPolicy(uc.Policy),
		log:               log.With("upstream", name),
		metrics:           m,
		counters:          observe.NewUpstreamCounters(m, name),
		timeouts:          timeouts,
		maxResponseHeader: maxResponseHeader,
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
	p.failLog = observe.NewRateLimitedLog(log, slog.LevelWarn, "upstream failures not logged", "upstream", name)
	for _, s := range uc.Targets {
		u, err := config.ParseTarget(s)
		if err != nil {
			return nil, err
		}
		addr := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" || u.Scheme == "tlcp" {
				port = "443"
			}
			addr = net.JoinHostPort(u.Hostname(), port)
		}
		t := &target{url: u, addr: addr, host: uc.Host}
		if uc.Host == config.UpstreamHostTarget {
			t.host = targetHost(u)
		}
		t.healthy.Store(true)
		if uc.MaxConnsPerTarget != nil && p.scheme != "tcp" {
			queue := 0
			if uc.QueueSize != nil {
				queue = *uc.QueueSize
			}
			t.slots = newTargetSlots(*uc.MaxConnsPerTarget, queue, uc.QueueTimeout.D(), m, name, addr)
		}
		p.targets = append(p.targets, t)
	}
	ts := transportSettings{timeouts: timeouts, maxResponseHeader: maxResponseHeader, store: store, offline: offline}
	if uc.MaxConnsPerTarget != nil {
		ts.maxConnsPerTarget = *uc.MaxConnsPerTarget
	}
	tr, err := newTransport(p, uc, ts)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", name, err)
	}
	p.transport = tr
	m.UpstreamHealthy.WithLabelValues(name).Set(float64(len(p.targets)))
	return p, nil
}

// targetHost is the target u's host[:port] as a Host header names it:
// without the port when it is the scheme's default.
func targetHost(u *url.URL) string {
	def := "80"
	if u.Scheme == "https" || u.Scheme == "tlcp" {
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
func (p *pool) filesUnchanged() bool {
	if tr, ok := p.transport.(*tlcpTransport); ok {
		return tr.filesUnchanged()
	}
	return true
}

// close stops health checking and closes the idle upstream connections
// (a tlcp:// pool's others too, once their requests are done).
func (p *pool) close() {
	if p.stop != nil {
		p.stop()
		<-p.stopped
	}
	if tr, ok := p.transport.(*tlcpTransport); ok {
		tr.close()
		return
	}
	p.transport.closeIdle()
}

// pick chooses an available target not in tried. When fewer than
// panicThreshold percent of the targets are available, passive ejections
// are ignored (Envoy's panic mode): a pool whose targets all failed a few
// requests in a row, in a blip or a deploy, keeps trying them rather than
// answer 503 to everyone for eject_for. The active checks' verdict still
// holds.
func (p *pool) pick(tried []*target) *target {
	now := time.Now()
	available := 0
	for _, t := range p.targets {
		if t.available(now) {
			available++
		}
	}
	panicking := available*100 < p.panicThreshold*len(p.targets)
	if panicking != p.panicking.Load() && p.panicking.CompareAndSwap(!panicking, panicking) {
		if panicking {
			p.log.Warn("upstream in panic mode: too few targets in service, ejected targets are used too", "in_service", available, "targets", len(p.targets), "panic_threshold_percent", p.panicThreshold)
		} else {
			p.log.Info("upstream out of panic mode", "in_service", available, "targets", len(p.targets))
		}
	}
	if available == len(p.targets) && len(tried) == 0 {
		return p.policy.pick(p.targets)
	}
	cands := make([]*target, 0, len(p.targets))
	for _, t := range p.targets {
		if !t.available(now) && !(panicking && t.healthy.Load()) {
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
	return p.policy.pick(cands)
}

// upstreamError is a failure to get a response from a pool, with the
// target that failed (nil when none could be picked).
type upstreamError struct {
	pool   string
	target string
	err    error
}

func (e *upstreamError) Error() string {
	if e.target == "" {
		return "upstream " + e.pool + ": " + e.err.Error()
	}
	return "upstream " + e.pool + " target " + e.target + ": " + e.err.Error()
}

func (e *upstreamError) Unwrap() error { return e.err }

// RoundTrip sends req to a target of the pool, retrying idempotent
// requests that could not be sent on other targets.
func (p *pool) RoundTrip(req *http.Request) (*http.Response, error) {
	var triedBuf [4]*target
	tried := triedBuf[:0]
	var lastErr, busy error
	client := req.Context().Value(forward.ConnInfoKey{})
	for attempt := 0; ; attempt++ {
		t := p.pick(tried)
		if t == nil {
			if lastErr != nil {
				// Every other target was tried; the last failure stands.
				return nil, lastErr
			}
			if busy != nil {
				upstreamFailed(p.metrics, p.name, busy)
				return nil, busy
			}
			upstreamFailed(p.metrics, p.name, errNoTarget)
			return nil, &upstreamError{pool: p.name, err: errNoTarget}
		}
		tried = append(tried, t)
		if t.slots != nil {
			if err := t.slots.acquire(req.Context(), client); err != nil {
				if req.Context().Err() != nil {
					return nil, err
				}
				busy = &upstreamError{pool: p.name, target: t.addr, err: err}
				var be *targetBusyError
				if errors.As(err, &be) && !be.timedOut {
					// A full queue answers at once: another target may
					// have room. Not an attempt.
					attempt--
					continue
				}
				if lastErr == nil {
					upstreamFailed(p.metrics, p.name, busy)
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
		t.inflight.Add(1)
		start := time.Now()
		resp, err := p.transport.roundTrip(out, t)
		t.inflight.Add(-1)
		if t.slots != nil {
			if err == nil {
				holdUntilClosed(resp, func() { t.slots.release(client) })
			} else {
				t.slots.release(client)
			}
		}
		if err == nil {
			p.succeeded(t)
			p.counters.Responded(p.metrics, p.name, resp.StatusCode)
			p.counters.Duration.Observe(time.Since(start).Seconds())
			return resp, nil
		}
		if be := forward.ClientBodyFailure(req); be != nil {
			// The client broke its own request body: no fault of the
			// target, and nothing to retry.
			return nil, be
		}
		if req.Context().Err() != nil {
			// The client went away: nothing to count against the
			// target, nobody to answer.
			return nil, err
		}
		upstreamFailed(p.metrics, p.name, err)
		p.failed(t, err)
		lastErr = &upstreamError{pool: p.name, target: t.addr, err: err}
		if attempt < p.retries && notSent(err) && retryable(req) && req.Context().Err() == nil {
			p.log.Debug("retrying on another target", "target", t.addr, "cause", err.Error())
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
func retryable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// dialTCP connects to a target of a tcp pool, trying others when a
// connection fails, up to retries times.
func (p *pool) dialTCP(ctx context.Context) (net.Conn, *target, error) {
	var tried []*target
	var lastErr error
	for attempt := 0; attempt <= p.retries; attempt++ {
		t := p.pick(tried)
		if t == nil {
			break
		}
		tried = append(tried, t)
		c, err := p.transport.dialStream(ctx, t)
		if err == nil {
			p.succeeded(t)
			return c, t, nil
		}
		lastErr = &upstreamError{pool: p.name, target: t.addr, err: err}
		upstreamFailed(p.metrics, p.name, err)
		if ctx.Err() != nil {
			break
		}
		p.failed(t, err)
	}
	if lastErr == nil {
		lastErr = &upstreamError{pool: p.name, err: errNoTarget}
		upstreamFailed(p.metrics, p.name, errNoTarget)
	}
	return nil, nil, lastErr
}

package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
)

// target is one address of an upstream pool with its health.
type target struct {
	url  *url.URL
	addr string // host:port

	inflight atomic.Int64
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

// pool is an upstream: targets, a selection policy, health checking and
// the transport that reaches them.
type pool struct {
	name    string
	scheme  string // http, https or tcp
	cfg     config.Upstream
	targets []*target
	policy  selectionPolicy
	log     *slog.Logger
	metrics *Metrics

	dialer    *net.Dialer
	tlsConfig *tls.Config // https targets
	transport *http.Transport
	retries   int
	maxFails  int

	stop     context.CancelFunc
	stopped  chan struct{}
	timeouts config.Timeouts
}

func newPool(name string, uc *config.Upstream, timeouts config.Timeouts, log *slog.Logger, m *Metrics) (*pool, error) {
	p := &pool{
		name:     name,
		scheme:   uc.Scheme(),
		cfg:      *uc,
		policy:   newPolicy(uc.Policy),
		log:      log.With("upstream", name),
		metrics:  m,
		timeouts: timeouts,
		dialer:   &net.Dialer{Timeout: timeouts.UpstreamConnect.D(), KeepAlive: 30 * time.Second},
	}
	if uc.Retries != nil {
		p.retries = *uc.Retries
	}
	if uc.Passive.MaxFails != nil {
		p.maxFails = *uc.Passive.MaxFails
	}
	for _, s := range uc.Targets {
		u, err := config.ParseTarget(s)
		if err != nil {
			return nil, err
		}
		addr := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			addr = net.JoinHostPort(u.Hostname(), port)
		}
		t := &target{url: u, addr: addr}
		t.healthy.Store(true)
		p.targets = append(p.targets, t)
	}
	if p.scheme == "https" {
		tc, err := upstreamTLSConfig(uc.TLS)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", name, err)
		}
		p.tlsConfig = tc
	}
	if p.scheme != "tcp" {
		p.transport = &http.Transport{
			DialContext:           p.dialer.DialContext,
			TLSClientConfig:       p.tlsConfig,
			TLSHandshakeTimeout:   timeouts.UpstreamConnect.D(),
			ResponseHeaderTimeout: timeouts.UpstreamResponse.D(),
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   256,
			ExpectContinueTimeout: time.Second,
			// The client's Accept-Encoding goes through untouched.
			DisableCompression: true,
		}
	}
	m.upstreamHealthy.WithLabelValues(name).Set(float64(len(p.targets)))
	return p, nil
}

func upstreamTLSConfig(c *config.UpstreamTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c == nil {
		return tc, nil
	}
	tc.ServerName = c.ServerName
	tc.InsecureSkipVerify = c.InsecureSkipVerify
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca %s holds no PEM certificate", c.CA)
		}
		tc.RootCAs = pool
	}
	if c.Cert != "" {
		cert, err := certs.LoadTLS(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{*cert}
	}
	return tc, nil
}

// start runs the active health checks until close.
func (p *pool) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.stopped = make(chan struct{})
	if p.cfg.Health.Disabled {
		close(p.stopped)
		return
	}
	go func() {
		defer close(p.stopped)
		interval := p.cfg.Health.Interval.D()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			p.checkAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// close stops health checking and, after in-flight requests had their
// time, the idle upstream connections.
func (p *pool) close() {
	if p.stop != nil {
		p.stop()
		<-p.stopped
	}
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
}

func (p *pool) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range p.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.check(ctx, t)
			if ctx.Err() != nil {
				return
			}
			p.record(t, err)
		}()
	}
	wg.Wait()
	p.updateHealthyGauge()
}

// record applies one check result; each target is checked by one
// goroutine at a time, so the counters need no lock.
func (p *pool) record(t *target, err error) {
	if err != nil {
		t.checkPasses = 0
		t.checkFails++
		if t.checkFails >= p.cfg.Health.Fails && t.healthy.Load() {
			t.healthy.Store(false)
			p.log.Warn("upstream target down", "target", t.addr, "cause", err.Error())
		}
		return
	}
	t.checkFails = 0
	t.checkPasses++
	if t.checkPasses >= p.cfg.Health.Passes && !t.healthy.Load() {
		t.healthy.Store(true)
		t.fails.Store(0)
		t.ejectedUntil.Store(0)
		p.log.Info("upstream target up", "target", t.addr)
	}
}

func (p *pool) check(ctx context.Context, t *target) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Health.Timeout.D())
	defer cancel()
	if p.cfg.Health.Path == "" || p.scheme == "tcp" {
		c, err := p.dialer.DialContext(ctx, "tcp", t.addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	u := *t.url
	u.Path = p.cfg.Health.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "gmgate-health-check")
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("health check %s answered %s", p.cfg.Health.Path, resp.Status)
	}
	return nil
}

func (p *pool) updateHealthyGauge() {
	n := 0
	now := time.Now()
	for _, t := range p.targets {
		if t.available(now) {
			n++
		}
	}
	p.metrics.upstreamHealthy.WithLabelValues(p.name).Set(float64(n))
}

// pick chooses an available target not in tried.
func (p *pool) pick(tried []*target) *target {
	now := time.Now()
	cands := make([]*target, 0, len(p.targets))
	for _, t := range p.targets {
		if !t.available(now) {
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

// failed counts a failure on real traffic against t and ejects it after
// maxFails in a row.
func (p *pool) failed(t *target, err error) {
	if p.maxFails <= 0 {
		return
	}
	if n := t.fails.Add(1); int(n) >= p.maxFails {
		until := time.Now().Add(p.cfg.Passive.EjectFor.D())
		if t.ejectedUntil.Swap(until.UnixNano()) < time.Now().UnixNano() {
			p.log.Warn("upstream target ejected", "target", t.addr, "failures", n, "for", p.cfg.Passive.EjectFor.String(), "cause", err.Error())
		}
		t.fails.Store(0)
		p.updateHealthyGauge()
	}
}

func (p *pool) succeeded(t *target) {
	if t.fails.Load() != 0 {
		t.fails.Store(0)
	}
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
	var tried []*target
	var lastErr error
	for attempt := 0; ; attempt++ {
		t := p.pick(tried)
		if t == nil {
			if lastErr != nil {
				// Every other target was tried; the last failure stands.
				return nil, lastErr
			}
			p.metrics.upstreamResult(p.name, 0, errNoTarget)
			return nil, &upstreamError{pool: p.name, err: errNoTarget}
		}
		tried = append(tried, t)
		out := req
		if attempt > 0 {
			out = req.Clone(req.Context())
		}
		out.URL.Scheme = p.scheme
		out.URL.Host = t.url.Host
		t.inflight.Add(1)
		start := time.Now()
		resp, err := p.transport.RoundTrip(out)
		t.inflight.Add(-1)
		if err == nil {
			p.succeeded(t)
			p.metrics.upstreamResult(p.name, resp.StatusCode, nil)
			p.metrics.upstreamDuration.WithLabelValues(p.name).Observe(time.Since(start).Seconds())
			return resp, nil
		}
		p.metrics.upstreamResult(p.name, 0, err)
		if req.Context().Err() == nil {
			p.failed(t, err)
		}
		lastErr = &upstreamError{pool: p.name, target: t.addr, err: err}
		if attempt < p.retries && notSent(err) && retryable(req) && req.Context().Err() == nil {
			p.log.Debug("retrying on another target", "target", t.addr, "cause", err.Error())
			continue
		}
		return nil, lastErr
	}
}

// notSent reports whether err happened before any byte of the request
// left: a failed dial (refused, unreachable, timed out connecting).
func notSent(err error) bool {
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
		c, err := p.dialer.DialContext(ctx, "tcp", t.addr)
		if err == nil {
			p.succeeded(t)
			return c, t, nil
		}
		lastErr = &upstreamError{pool: p.name, target: t.addr, err: err}
		p.metrics.upstreamResult(p.name, 0, err)
		if ctx.Err() != nil {
			break
		}
		p.failed(t, err)
	}
	if lastErr == nil {
		lastErr = &upstreamError{pool: p.name, err: errNoTarget}
		p.metrics.upstreamResult(p.name, 0, errNoTarget)
	}
	return nil, nil, lastErr
}

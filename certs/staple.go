package certs

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Staple states, the values of the state label of
// gmgate_ocsp_staple_state.
const (
	// StapleGood: a current good answer is stapled.
	StapleGood = "good"
	// StaplePending: the first answer has not come yet.
	StaplePending = "pending"
	// StapleRevoked and StapleUnknown: the responder's answer, which
	// is never stapled.
	StapleRevoked = "revoked"
	StapleUnknown = "unknown"
	// StapleFailed: the responder could not be asked or its answer did
	// not verify, and no current answer is left.
	StapleFailed = "failed"
	// StapleNoIssuer: the certificate file holds no issuer certificate
	// after the leaf, which the request names.
	StapleNoIssuer = "no_issuer"
)

// Bounds of the refresh schedule.
const (
	// stapleMinRefresh is the least time between two requests for one
	// certificate, whatever its answers' validity.
	stapleMinRefresh = time.Minute
	// stapleMaxRetry bounds the wait after failures (which doubles from
	// stapleMinRefresh).
	stapleMaxRetry = time.Hour
)

// StaplerOptions configure a Stapler.
type StaplerOptions struct {
	// Logger receives state changes; slog.Default when nil.
	Logger *slog.Logger
	// HTTPClient asks the responders; one that follows no redirects when
	// nil.
	HTTPClient *http.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Stapler keeps an OCSP response for each TLS certificate it is given,
// from the responder named in the certificate's authorityInfoAccess,
// to staple in handshakes: asked for at once, again at half of each
// answer's validity, kept while the same certificate is in service
// (across reloads, since stores share one Stapler), and dropped when it
// is no longer current. Only a good answer that verifies with the
// certificate's issuer (the next certificate of its file) is stapled.
type Stapler struct {
	opts   StaplerOptions
	log    *slog.Logger
	client *http.Client

	mu      sync.Mutex
	records map[[32]byte]*stapleRecord
	closed  bool
}

// NewStapler makes a Stapler; Close stops it.
func NewStapler(opts StaplerOptions) *Stapler {
	s := &Stapler{opts: opts, log: opts.Logger, client: opts.HTTPClient, records: map[[32]byte]*stapleRecord{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	return s
}

// stapleRecord is the stapling of one certificate (by its DER and its
// issuer's), shared by the store entries that serve it.
type stapleRecord struct {
	name         string // the source that first served it, for logs
	leaf, issuer *smx509.Certificate
	refs         int // under Stapler.mu
	cancel       context.CancelFunc
	done         chan struct{}

	// staple is the current good answer (nil for none).
	staple   atomic.Pointer[revocation.Staple]
	state    atomic.Pointer[string]
	failures atomic.Uint64
}

// track starts (or joins) the stapling of the certificate that leads
// chain (DER, the issuer next), served under name; nil when it cannot be
// stapled (no responder named). release undoes it.
func (s *Stapler) track(name string, chain [][]byte) *stapleRecord {
	if s == nil || len(chain) == 0 {
		return nil
	}
	leaf, err := smx509.ParseCertificate(chain[0])
	if err != nil || len(leaf.OCSPServer) == 0 {
		return nil
	}
	h := sha256.New()
	for _, der := range chain[:min(2, len(chain))] {
		h.Write(der)
	}
	var key [32]byte
	h.Sum(key[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if r := s.records[key]; r != nil {
		r.refs++
		return r
	}
	r := &stapleRecord{name: name, leaf: leaf, refs: 1}
	s.records[key] = r
	if len(chain) < 2 {
		r.setState(StapleNoIssuer)
		s.log.Warn("OCSP stapling: the certificate names an OCSP responder, but its file has no issuer certificate after it; append the chain to staple OCSP responses", "name", name)
		return r
	}
	if r.issuer, err = smx509.ParseCertificate(chain[1]); err != nil {
		r.setState(StapleNoIssuer)
		return r
	}
	r.setState(StaplePending)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go s.refresh(ctx, r)
	return r
}

// release ends one use of r; the last stops its refreshing.
func (s *Stapler) release(r *stapleRecord) {
	if s == nil || r == nil {
		return
	}
	s.mu.Lock()
	r.refs--
	last := r.refs == 0
	if last {
		for k, v := range s.records {
			if v == r {
				delete(s.records, k)
			}
		}
	}
	s.mu.Unlock()
	if last && r.cancel != nil {
		r.cancel()
		<-r.done
	}
}

// Close stops every refresh; the certificates keep the answers they
// have until those are no longer current.
func (s *Stapler) Close() {
	s.mu.Lock()
	s.closed = true
	var rs []*stapleRecord
	for k, r := range s.records {
		rs = append(rs, r)
		delete(s.records, k)
	}
	s.mu.Unlock()
	for _, r := range rs {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	}
}

// refresh asks the responder, then again at half the answer's validity
// (sooner after failures, never more often than stapleMinRefresh), until
// ctx ends.
func (s *Stapler) refresh(ctx context.Context, r *stapleRecord) {
	defer close(r.done)
	retry := stapleMinRefresh
	for {
		next := s.fetchOnce(ctx, r, &retry)
		wait := max(next.Sub(s.opts.Now()), stapleMinRefresh)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fetchOnce asks the responder once and returns when to ask again.
func (s *Stapler) fetchOnce(ctx context.Context, r *stapleRecord, retry *time.Duration) time.Time {
	st, err := revocation.FetchStaple(ctx, r.leaf, r.issuer, revocation.StapleOptions{HTTPClient: s.client, Now: s.opts.Now})
	now := s.opts.Now()
	if ctx.Err() != nil {
		return now
	}
	if err != nil {
		r.failures.Add(1)
		next := now.Add(*retry)
		*retry = min(2**retry, stapleMaxRetry)
		cur := r.staple.Load()
		if cur != nil && now.Before(cur.NextUpdate) {
			s.log.Warn("OCSP stapling: the responder could not be asked; the current response stays stapled until its nextUpdate", "name", r.name, "next_update", cur.NextUpdate.UTC().Format(time.RFC3339), "cause", err.Error())
			return next
		}
		r.staple.Store(nil)
		if r.setState(StapleFailed) {
			s.log.Error("OCSP stapling: no current OCSP response to staple", "name", r.name, "cause", err.Error())
		}
		return next
	}
	*retry = stapleMinRefresh
	next := nextRefresh(st, now)
	switch st.Status {
	case revocation.StatusGood:
		r.staple.Store(st)
		if r.setState(StapleGood) {
			s.log.Info("OCSP stapling: stapling a good response", "name", r.name, "responder", st.Responder, "next_update", st.NextUpdate.UTC().Format(time.RFC3339))
		}
	case revocation.StatusRevoked:
		r.staple.Store(nil)
		if r.setState(StapleRevoked) {
			s.log.Error("OCSP stapling: the responder says the certificate is REVOKED; nothing is stapled, replace the certificate", "name", r.name, "responder", st.Responder)
		}
	default:
		r.staple.Store(nil)
		if r.setState(StapleUnknown) {
			s.log.Warn("OCSP stapling: the responder does not know the certificate; nothing is stapled", "name", r.name, "responder", st.Responder)
		}
	}
	return next
}

// nextRefresh is when to ask again after the answer st came at now: at
// half its validity or, for an answer made long ago (many responders
// sign a batch ahead), halfway from now to its nextUpdate; never sooner
// than stapleMinRefresh.
func nextRefresh(st *revocation.Staple, now time.Time) time.Time {
	next := st.ThisUpdate.Add(st.NextUpdate.Sub(st.ThisUpdate) / 2)
	if next.Before(now) {
		next = now.Add(st.NextUpdate.Sub(now) / 2)
	}
	if earliest := now.Add(stapleMinRefresh); next.Before(earliest) {
		next = earliest
	}
	return next
}

// setState records the state and reports whether it changed.
func (r *stapleRecord) setState(st string) bool {
	old := r.state.Swap(&st)
	return old == nil || *old != st
}

// current is the answer to staple now: a good one before its
// nextUpdate, else nil.
func (r *stapleRecord) current(now time.Time) *revocation.Staple {
	if r == nil {
		return nil
	}
	st := r.staple.Load()
	if st == nil || !now.Before(st.NextUpdate) {
		return nil
	}
	return st
}

// stapled serves a store entry's certificate (tls.Certificate or
// tlcp.Certificate) with its current staple: a copy of the certificate
// made once per answer.
type stapled[C any] struct {
	base   *C
	record *stapleRecord
	// with sets the staple on a copy of the certificate.
	with func(C, []byte) C
	copy atomic.Pointer[stapledCopy[C]]
}

type stapledCopy[C any] struct {
	staple *revocation.Staple
	cert   *C
}

// certificate returns the certificate to present at now.
func (c *stapled[C]) certificate(now time.Time) *C {
	st := c.record.current(now)
	if st == nil {
		return c.base
	}
	if cp := c.copy.Load(); cp != nil && cp.staple == st {
		return cp.cert
	}
	cert := c.with(*c.base, st.DER)
	c.copy.Store(&stapledCopy[C]{staple: st, cert: &cert})
	return &cert
}

func tlsWithStaple(c tls.Certificate, staple []byte) tls.Certificate {
	c.OCSPStaple = staple
	return c
}

func tlcpWithStaple(c tlcp.Certificate, staple []byte) tlcp.Certificate {
	c.OCSPStaple = staple
	return c
}

// stateAt is the record's state at now, for metrics: a good answer past
// its nextUpdate counts as failed.
func (r *stapleRecord) stateAt(now time.Time) (string, *revocation.Staple) {
	st := r.current(now)
	p := r.state.Load()
	if p == nil {
		return StaplePending, st
	}
	if *p == StapleGood && st == nil {
		return StapleFailed, nil
	}
	return *p, st
}

var (
	stapleStateDesc = prometheus.NewDesc("gmgate_ocsp_staple_state",
		"OCSP stapling of each file-based certificate (role tls, or sign for TLCP) whose authorityInfoAccess names a responder: 1 for its current state (good, pending, revoked, unknown, failed, no_issuer).",
		[]string{"name", "role", "state"}, nil)
	stapleNextUpdateDesc = prometheus.NewDesc("gmgate_ocsp_staple_next_update_timestamp_seconds",
		"nextUpdate of the OCSP response stapled to each certificate (absent while none is).",
		[]string{"name", "role"}, nil)
	stapleFailuresDesc = prometheus.NewDesc("gmgate_ocsp_staple_fetch_failures_total",
		"Requests to a certificate's OCSP responder that failed or whose answer did not verify.",
		[]string{"name", "role"}, nil)
)

// collectStaple reports the stapling of a store entry's certificate in
// role (tls, sign).
func collectStaple(ch chan<- prometheus.Metric, name, role string, r *stapleRecord, now time.Time) {
	state, st := r.stateAt(now)
	for _, s := range []string{StapleGood, StaplePending, StapleRevoked, StapleUnknown, StapleFailed, StapleNoIssuer} {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(stapleStateDesc, prometheus.GaugeValue, v, name, role, s)
	}
	if st != nil {
		ch <- prometheus.MustNewConstMetric(stapleNextUpdateDesc, prometheus.GaugeValue, float64(st.NextUpdate.Unix()), name, role)
	}
	ch <- prometheus.MustNewConstMetric(stapleFailuresDesc, prometheus.CounterValue, float64(r.failures.Load()), name, role)
}

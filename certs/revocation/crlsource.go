package revocation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Defaults of CRLOptions.
const (
	// DefaultCRLRefresh is how often CRL sources are read again (and
	// also at each CRL's nextUpdate).
	DefaultCRLRefresh = time.Hour
	// DefaultMaxCRLBytes bounds one CRL: 10 MiB, some 200 000 entries.
	DefaultMaxCRLBytes = 10 << 20
	// crlRetryMin and crlRetryMax bound the wait after a failed read.
	crlRetryMin = 30 * time.Second
	crlRetryMax = 10 * time.Minute
)

// CRLOptions configure a CRLChecker.
type CRLOptions struct {
	// Sources are CRL files (PEM or DER) and http(s) URLs.
	Sources []string
	// Issuers are CAs whose CRLs are verified when read: the CAs that
	// verify client certificates. A CRL of another issuer (an
	// intermediate the clients send) is kept, and its signature checked
	// with that issuer's certificate from the first verified chain that
	// names it; until then it covers nothing.
	Issuers []*smx509.Certificate
	// Refresh is how often sources are read again; DefaultCRLRefresh
	// when zero.
	Refresh time.Duration
	// Grace is how long after its nextUpdate a CRL is still used while
	// its source fails; DefaultGrace when zero, none when negative.
	Grace time.Duration
	// Timeout bounds one fetch; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxBytes bounds one CRL; DefaultMaxCRLBytes when zero.
	MaxBytes int64
	// HTTPClient fetches URLs; one that follows no redirects when nil.
	HTTPClient *http.Client
	// Observer hears of state changes; none when nil.
	Observer Observer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// CRLChecker holds the current CRL of each source and answers from
// them. Its methods are safe for concurrent use.
type CRLChecker struct {
	opts    CRLOptions
	sources []*crlSource
	// refreshMu makes refreshes one at a time.
	refreshMu sync.Mutex
	// ownClient is set when the HTTP client is the checker's own.
	ownClient bool
}

// crlSource is one file or URL.
type crlSource struct {
	location string
	name     string
	current  atomic.Pointer[CRL]
	// fetched is the outcome of the last read, for reports that must
	// not wait for a refresh in progress.
	fetched atomic.Pointer[fetchOutcome]
	// guarded by CRLChecker.refreshMu:
	lastErr  error
	failures int
	state    SourceState
	reported bool
}

// NewCRLChecker checks the options; it reads no source (Refresh or Run
// does).
func NewCRLChecker(opts CRLOptions) (*CRLChecker, error) {
	if len(opts.Sources) == 0 {
		return nil, errors.New("no CRL source given")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultCRLRefresh
	}
	switch {
	case opts.Grace == 0:
		opts.Grace = DefaultGrace
	case opts.Grace < 0:
		opts.Grace = 0
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxCRLBytes
	}
	own := opts.HTTPClient == nil
	if own {
		opts.HTTPClient = defaultClient()
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &CRLChecker{opts: opts, ownClient: own}
	seen := map[string]bool{}
	for _, s := range opts.Sources {
		if s == "" {
			return nil, errors.New("an empty CRL source")
		}
		if isURL(s) {
			if _, err := checkURL(s); err != nil {
				return nil, err
			}
		}
		if seen[s] {
			return nil, fmt.Errorf("CRL source %s is given twice", redact(s))
		}
		seen[s] = true
		c.sources = append(c.sources, &crlSource{location: s, name: redact(s), state: SourceExpired})
	}
	return c, nil
}

// Refresh reads every source now and keeps each new CRL that verifies
// and is not older than the one it replaces. It returns the errors of
// the sources that failed (their previous CRLs stay).
func (c *CRLChecker) Refresh(ctx context.Context) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	var errs []error
	for _, s := range c.sources {
		if err := c.refreshSource(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *CRLChecker) refreshSource(ctx context.Context, s *crlSource) error {
	crl, err := c.load(ctx, s)
	if err == nil {
		if old := s.current.Load(); !crl.newerThan(old) {
			err = fmt.Errorf("CRL %s: it is older than the CRL already loaded (thisUpdate %s, before %s); kept that one", s.name, crl.ThisUpdate.UTC().Format(time.RFC3339), old.ThisUpdate.UTC().Format(time.RFC3339))
		} else if now := c.opts.Now(); crl.ThisUpdate.After(now.Add(clockSkew)) {
			err = fmt.Errorf("CRL %s: its thisUpdate %s is in the future; check the clocks", s.name, crl.ThisUpdate.UTC().Format(time.RFC3339))
		} else {
			s.current.Store(crl)
		}
	}
	s.lastErr = err
	out := &fetchOutcome{at: c.opts.Now()}
	if err != nil {
		s.failures++
		out.err = err.Error()
		if prev := s.fetched.Load(); prev != nil {
			out.succeeded = prev.succeeded
		}
	} else {
		s.failures = 0
		out.succeeded = out.at
	}
	s.fetched.Store(out)
	c.report(s)
	return err
}

// load reads and parses one source.
func (c *CRLChecker) load(ctx context.Context, s *crlSource) (*CRL, error) {
	var data []byte
	var err error
	if isURL(s.location) {
		data, err = httpDo(ctx, c.opts.HTTPClient, s.location, nil, "", c.opts.MaxBytes, c.opts.Timeout)
	} else {
		data, err = readFile(s.location, c.opts.MaxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("CRL %v", err)
	}
	crl, err := parseCRL(data, c.opts.Issuers, true)
	if err != nil {
		return nil, fmt.Errorf("CRL %s: %w", s.name, err)
	}
	return crl, nil
}

// stateOf is the state of a source at now (refreshMu held, or a
// snapshot good enough for a report).
func (c *CRLChecker) stateOf(s *crlSource, now time.Time) SourceState {
	crl := s.current.Load()
	switch {
	case crl == nil || now.After(crl.NextUpdate.Add(c.opts.Grace)):
		return SourceExpired
	case now.After(crl.NextUpdate):
		return SourceStale
	case s.lastErr != nil:
		return SourceFailing
	}
	return SourceOK
}

// report tells the observer when a source's state changed (refreshMu
// held).
func (c *CRLChecker) report(s *crlSource) {
	st := c.stateOf(s, c.opts.Now())
	if s.reported && st == s.state {
		return
	}
	s.state, s.reported = st, true
	c.opts.Observer.SourceChanged("CRL "+s.name, st, s.lastErr)
}

// Run reads the sources at once and then again every Refresh, at each
// CRL's nextUpdate, at the end of its grace, and sooner after a failure
// (from 30 s, doubling, to at most 10 min or Refresh), until ctx ends.
func (c *CRLChecker) Run(ctx context.Context) {
	for {
		_ = c.Refresh(ctx)
		t := time.NewTimer(c.nextWake())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// nextWake is how long to wait before the next refresh.
func (c *CRLChecker) nextWake() time.Duration {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	now := c.opts.Now()
	wait := c.opts.Refresh
	for _, s := range c.sources {
		if s.failures > 0 {
			retry := crlRetryMin << min(s.failures-1, 10)
			wait = min(wait, retry, crlRetryMax)
		}
		if crl := s.current.Load(); crl != nil {
			for _, at := range []time.Time{crl.NextUpdate, crl.NextUpdate.Add(c.opts.Grace)} {
				if d := at.Sub(now); d > 0 {
					wait = min(wait, d+time.Second)
				}
			}
		}
	}
	return max(wait, time.Second)
}

// Check answers for leaf, issued by issuer (the next certificate of the
// verified chain), from the CRLs of that issuer: revoked if any lists
// it, good if a usable one does not, unknown otherwise.
func (c *CRLChecker) Check(leaf, issuer *smx509.Certificate) Result {
	return c.check(fromSM(leaf), fromSM(issuer))
}

func (c *CRLChecker) check(leaf, issuer cert) Result {
	now := c.opts.Now()
	r := Result{Status: StatusUnknown, Serial: leaf.serial}
	var good *crlSource
	var unusable []string
	for _, s := range c.sources {
		crl := s.current.Load()
		if crl == nil {
			continue
		}
		if ok, err := crl.covers(issuer); !ok {
			if err != nil {
				unusable = append(unusable, fmt.Sprintf("CRL %s: %v", s.name, err))
			}
			continue
		}
		if err := crl.CheckTime(now, c.opts.Grace); err != nil {
			unusable = append(unusable, fmt.Sprintf("CRL %s: %v", s.name, err))
			continue
		}
		if at, reason, ok := crl.Revoked(leaf.serial); ok {
			r.Status, r.Source, r.RevokedAt, r.Reason = StatusRevoked, "CRL "+s.name, at, reason
			r.Subject = leaf.subject()
			return r
		}
		if good == nil {
			good = s
		}
	}
	switch {
	case good != nil:
		r.Status, r.Source = StatusGood, "CRL "+good.name
		if now.After(good.current.Load().NextUpdate) {
			r.Detail = "the CRL is past its nextUpdate and its source could not be read again; used within the grace"
		}
	case len(unusable) > 0:
		r.Subject, r.Detail = leaf.subject(), unusable[0]
	default:
		r.Subject, r.Detail = leaf.subject(), fmt.Sprintf("no loaded CRL is issued by the certificate's CA %q", issuerName(issuer))
	}
	return r
}

// issuerName is the subject of an issuer certificate, for messages.
func issuerName(c cert) string { return c.subject() }

// Current returns the CRL loaded from a source (nil before the first
// successful read).
func (c *CRLChecker) Current(source string) *CRL {
	for _, s := range c.sources {
		if s.location == source {
			return s.current.Load()
		}
	}
	return nil
}

package revocation

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Defaults of OCSPOptions.
const (
	// DefaultOCSPTimeout bounds one request to a responder: a handshake
	// waits for it.
	DefaultOCSPTimeout = 5 * time.Second
	// DefaultMaxOCSPBytes bounds one response.
	DefaultMaxOCSPBytes = 64 << 10
	// DefaultOCSPCacheEntries and DefaultOCSPCacheBytes bound the cache.
	DefaultOCSPCacheEntries = 10000
	DefaultOCSPCacheBytes   = 8 << 20
	// DefaultOCSPRetry is how long a certificate's responder is not
	// asked again after a failure.
	DefaultOCSPRetry = 30 * time.Second
	// DefaultOCSPMaxAge is how long a response without nextUpdate is
	// used.
	DefaultOCSPMaxAge = 5 * time.Minute
	// DefaultOCSPRefresh is how long an answer is used before the
	// responder is asked again, for responders whose nextUpdate lies
	// days ahead.
	DefaultOCSPRefresh = time.Hour
	// DefaultOCSPConcurrency bounds the requests in flight.
	DefaultOCSPConcurrency = 16
)

// OCSPOptions configure an OCSPChecker.
type OCSPOptions struct {
	// Responder, when set, is asked for every certificate instead of the
	// responder named in the certificate's authorityInfoAccess.
	Responder string
	// Hash is the CertID hash of requests; HashSHA1 when empty.
	Hash Hash
	// Timeout bounds one request; DefaultOCSPTimeout when zero.
	Timeout time.Duration
	// MaxBytes bounds one response; DefaultMaxOCSPBytes when zero.
	MaxBytes int64
	// CacheEntries and CacheBytes bound the cache of answers.
	CacheEntries int
	CacheBytes   int64
	// Grace is how long after its nextUpdate a cached answer is still
	// used while the responder fails; DefaultGrace when zero, none when
	// negative.
	Grace time.Duration
	// Retry is how long a failed certificate's responder is not asked
	// again; DefaultOCSPRetry when zero.
	Retry time.Duration
	// MaxAge is how long an answer without nextUpdate is used;
	// DefaultOCSPMaxAge when zero.
	MaxAge time.Duration
	// Refresh is how long an answer is used before the responder is
	// asked again, however far its nextUpdate (until which it still
	// serves while the responder fails); DefaultOCSPRefresh when zero.
	Refresh time.Duration
	// Concurrency bounds the requests in flight; DefaultOCSPConcurrency
	// when zero.
	Concurrency int
	// HTTPClient sends requests; one that follows no redirects when nil.
	HTTPClient *http.Client
	// Observer hears of responders' state changes; none when nil.
	Observer Observer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// OCSPChecker asks OCSP responders about certificates and caches their
// answers. Its methods are safe for concurrent use.
type OCSPChecker struct {
	opts OCSPOptions
	sem  chan struct{}

	mu       sync.Mutex
	lru      *list.List // of *ocspEntry, most recent first
	entries  map[string]*list.Element
	bytes    int64
	inflight map[string]*ocspCall
	states   map[string]responderStatus // per responder URL
	// ownClient is set when the HTTP client is the checker's own.
	ownClient bool
}

// ocspEntry is a cached answer, or the memory of a failure.
type ocspEntry struct {
	key    string
	result Result // Source set; Status good, revoked or unknown
	// refreshAt is when the responder is asked again: the answer's
	// nextUpdate, or sooner after Refresh.
	refreshAt time.Time
	// expires is the answer's nextUpdate (or thisUpdate + MaxAge);
	// zero for an entry that holds only a failure.
	expires time.Time
	// retryAt is when the responder may be asked again after a failure.
	retryAt time.Time
	lastErr error
	size    int64
}

type ocspCall struct {
	done chan struct{}
}

// NewOCSPChecker checks the options.
func NewOCSPChecker(opts OCSPOptions) (*OCSPChecker, error) {
	if opts.Responder != "" {
		if _, err := checkURL(opts.Responder); err != nil {
			return nil, fmt.Errorf("OCSP responder: %w", err)
		}
	}
	h, err := ParseHash(string(opts.Hash))
	if err != nil {
		return nil, err
	}
	opts.Hash = h
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultOCSPTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxOCSPBytes
	}
	if opts.CacheEntries <= 0 {
		opts.CacheEntries = DefaultOCSPCacheEntries
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultOCSPCacheBytes
	}
	switch {
	case opts.Grace == 0:
		opts.Grace = DefaultGrace
	case opts.Grace < 0:
		opts.Grace = 0
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultOCSPRetry
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultOCSPMaxAge
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultOCSPRefresh
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultOCSPConcurrency
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
	return &OCSPChecker{
		ownClient: own,
		opts:      opts,
		sem:       make(chan struct{}, opts.Concurrency),
		lru:       list.New(),
		entries:   map[string]*list.Element{},
		inflight:  map[string]*ocspCall{},
		states:    map[string]responderStatus{},
	}, nil
}

// Check asks about leaf, issued by issuer (the next certificate of the
// verified chain): from the cache while its answer is current, else
// from the responder, waiting at most the timeout or ctx.
func (o *OCSPChecker) Check(ctx context.Context, leaf, issuer *smx509.Certificate) Result {
	return o.check(ctx, fromSM(leaf), fromSM(issuer))
}

func (o *OCSPChecker) check(ctx context.Context, leaf, issuer cert) Result {
	base := Result{Status: StatusUnknown, Serial: leaf.serial, Subject: leaf.subject()}
	responder := o.responderFor(leaf)
	if responder == "" {
		base.Detail = "the certificate names no OCSP responder (authorityInfoAccess) and none is configured"
		return base
	}
	base.Source = "OCSP " + redact(responder)
	h := hashByOID(o.opts.Hash.oid())
	id, err := newCertID(h, o.opts.Hash.oid(), issuer, leaf.serial)
	if err != nil {
		base.Detail = err.Error()
		return base
	}
	key := id.key()
	for {
		now := o.opts.Now()
		o.mu.Lock()
		e := o.lookup(key)
		if e != nil && now.Before(e.refreshAt) {
			r := e.result
			o.mu.Unlock()
			return r
		}
		if e != nil && now.Before(e.retryAt) {
			r := o.staleOrUnknown(base, e, now) // e changes under mu
			o.mu.Unlock()
			return r
		}
		if call, ok := o.inflight[key]; ok {
			o.mu.Unlock()
			select {
			case <-call.done:
				continue
			case <-ctx.Done():
				// This handshake gave up; the responder did not fail, and
				// the call goes on for the others.
				return o.withoutAsking(base, key, ctx.Err())
			}
		}
		call := &ocspCall{done: make(chan struct{})}
		o.inflight[key] = call
		o.mu.Unlock()

		r, expires, err := o.fetch(ctx, responder, id, leaf, issuer, base)
		// The outcome goes into the cache before the call leaves
		// inflight: a check between the two would find neither and
		// ask the responder again.
		switch {
		case err != nil && ctx.Err() != nil:
			// The asking handshake ended (client gone, its deadline):
			// nothing is learnt about the responder, so nothing is
			// remembered against it; a waiter asks again.
			r = o.withoutAsking(base, key, err)
		case err != nil:
			var st SourceState
			r, st = o.failed(base, key, err)
			o.setState(responder, st, err)
		default:
			o.setState(responder, SourceOK, nil)
			o.store(&ocspEntry{key: key, result: r, expires: expires, refreshAt: minTime(expires, o.opts.Now().Add(o.opts.Refresh))})
		}
		o.mu.Lock()
		delete(o.inflight, key)
		close(call.done)
		o.mu.Unlock()
		return r
	}
}

// responderFor is the URL to ask about c.
func (o *OCSPChecker) responderFor(c cert) string {
	if o.opts.Responder != "" {
		return o.opts.Responder
	}
	for _, u := range c.ocsp {
		if _, err := checkURL(u); err == nil {
			return u
		}
	}
	return ""
}

// fetch asks the responder and checks its answer.
func (o *OCSPChecker) fetch(ctx context.Context, responder string, id certID, leaf, issuer cert, base Result) (Result, time.Time, error) {
	select {
	case o.sem <- struct{}{}:
		defer func() { <-o.sem }()
	case <-ctx.Done():
		return base, time.Time{}, fmt.Errorf("%s: too many OCSP requests in flight: %v", redact(responder), ctx.Err())
	}
	der, err := httpDo(ctx, o.opts.HTTPClient, responder, marshalOCSPRequest(id), "application/ocsp-request", o.opts.MaxBytes, o.opts.Timeout)
	if err != nil {
		return base, time.Time{}, err
	}
	ca, err := issuer.parsed()
	if err != nil {
		return base, time.Time{}, fmt.Errorf("issuer certificate: %v", err)
	}
	now := o.opts.Now()
	sr, err := checkOCSPAnswer(der, ca, issuer, leaf.serial, now, o.opts.MaxAge)
	if err != nil {
		return base, time.Time{}, fmt.Errorf("%s: %w", redact(responder), err)
	}
	r := base
	r.Status = sr.status
	if sr.status == StatusRevoked {
		r.RevokedAt, r.Reason = sr.revokedAt, sr.reason
	}
	if sr.status == StatusUnknown {
		r.Detail = "the responder does not know the certificate"
	}
	return r, sr.nextUpdate, nil
}

// checkOCSPAnswer parses an OCSP response and returns its verified
// answer about the certificate with serial issued by issuer (ca parsed),
// current at now; an answer without nextUpdate is current for maxAge
// after its thisUpdate.
func checkOCSPAnswer(der []byte, ca *smx509.Certificate, issuer cert, serial *big.Int, now time.Time, maxAge time.Duration) (singleResponse, error) {
	resp, err := parseOCSPResponse(der)
	if err != nil {
		return singleResponse{}, err
	}
	if resp.status != ocspSuccessful {
		return singleResponse{}, fmt.Errorf("the responder answered %s", statusText(resp.status))
	}
	if err := resp.verify(ca, now); err != nil {
		return singleResponse{}, err
	}
	sr, ok := resp.find(issuer, serial)
	if !ok {
		return sr, errors.New("the OCSP response does not answer for the certificate asked about")
	}
	if sr.thisUpdate.After(now.Add(clockSkew)) {
		return sr, fmt.Errorf("the OCSP answer's thisUpdate %s is in the future; check the clocks", sr.thisUpdate.UTC().Format(time.RFC3339))
	}
	if sr.nextUpdate.IsZero() {
		sr.nextUpdate = sr.thisUpdate.Add(maxAge)
	}
	if !now.Before(sr.nextUpdate) {
		return sr, fmt.Errorf("the OCSP answer is out of date (nextUpdate %s)", sr.nextUpdate.UTC().Format(time.RFC3339))
	}
	return sr, nil
}

// staleOrUnknown answers from an expired entry within the grace, else
// says unknown.
func (o *OCSPChecker) staleOrUnknown(base Result, e *ocspEntry, now time.Time) Result {
	if !e.expires.IsZero() && now.Before(e.expires.Add(o.opts.Grace)) {
		r := e.result
		r.Detail = "the responder could not be asked again (" + errString(e.lastErr) + "); its last answer is still current"
		if !now.Before(e.expires) {
			r.Detail = "the responder could not be asked again (" + errString(e.lastErr) + "); its last answer is past its nextUpdate and used within the grace"
		}
		return r
	}
	base.Detail = errString(e.lastErr)
	return base
}

// withoutAsking answers from what the cache holds for key, with err as
// the reason the responder was not heard, and changes nothing: for a
// check whose own context ended, which says nothing about the
// responder.
func (o *OCSPChecker) withoutAsking(base Result, key string, err error) Result {
	now := o.opts.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.entries[key]
	if !ok {
		base.Detail = err.Error()
		return base
	}
	cached := *e.Value.(*ocspEntry)
	cached.lastErr = err
	return o.staleOrUnknown(base, &cached, now)
}

// failed remembers a failure (so the responder is not asked again before
// Retry) and answers from what the cache still has, with the state that
// leaves the responder in.
func (o *OCSPChecker) failed(base Result, key string, err error) (Result, SourceState) {
	now := o.opts.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.lookup(key)
	if e == nil {
		e = &ocspEntry{key: key, result: base}
		o.insert(e)
	}
	e.retryAt, e.lastErr = now.Add(o.opts.Retry), err
	st := SourceExpired
	switch {
	case e.expires.IsZero():
	case now.Before(e.expires):
		st = SourceFailing
	case now.Before(e.expires.Add(o.opts.Grace)):
		st = SourceStale
	}
	return o.staleOrUnknown(base, e, now), st
}

func errString(err error) string {
	if err == nil {
		return "no answer yet"
	}
	return err.Error()
}

// setState records a responder's state after it was asked, and reports
// the state when it changed.
func (o *OCSPChecker) setState(responder string, st SourceState, err error) {
	rs := responderStatus{state: st, asked: o.opts.Now()}
	if err != nil {
		rs.lastErr = err.Error()
	}
	o.mu.Lock()
	old, ok := o.states[responder]
	if !ok && len(o.states) >= o.opts.CacheEntries {
		o.mu.Unlock()
		return // responders come from certificates: bound the map too
	}
	if st == SourceOK {
		rs.answered = rs.asked
	} else {
		rs.answered = old.answered
	}
	o.states[responder] = rs
	o.mu.Unlock()
	if ok && old.state == st {
		return
	}
	o.opts.Observer.SourceChanged("OCSP "+redact(responder), st, err)
}

// lookup returns the entry for key and marks it recently used (mu held).
func (o *OCSPChecker) lookup(key string) *ocspEntry {
	el, ok := o.entries[key]
	if !ok {
		return nil
	}
	o.lru.MoveToFront(el)
	return el.Value.(*ocspEntry)
}

// store caches an answer in place of what was cached for its key.
func (o *OCSPChecker) store(e *ocspEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if el, ok := o.entries[e.key]; ok {
		o.remove(el)
	}
	o.insert(e)
}

// insert adds e and evicts the least recently used entries beyond the
// bounds (mu held).
func (o *OCSPChecker) insert(e *ocspEntry) {
	e.size = int64(len(e.key)+len(e.result.Detail)+len(e.result.Subject)+len(e.result.Source)) + 256
	o.entries[e.key] = o.lru.PushFront(e)
	o.bytes += e.size
	for o.lru.Len() > o.opts.CacheEntries || o.bytes > o.opts.CacheBytes {
		back := o.lru.Back()
		if back == nil || back.Value.(*ocspEntry) == e {
			break
		}
		o.remove(back)
	}
}

func (o *OCSPChecker) remove(el *list.Element) {
	e := o.lru.Remove(el).(*ocspEntry)
	delete(o.entries, e.key)
	o.bytes -= e.size
}

// CacheLen returns the number of cached entries and their accounted
// size in bytes.
func (o *OCSPChecker) CacheLen() (entries int, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lru.Len(), o.bytes
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

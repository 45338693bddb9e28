package revocation

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Options configure a Checker: CRLs, OCSP, or both.
type Options struct {
	// CRL, when set, checks certificates against CRLs.
	CRL *CRLOptions
	// OCSP, when set, asks OCSP responders.
	OCSP *OCSPOptions
	// Policy decides about certificates whose status is unknown;
	// FailClosed when empty.
	Policy Policy
	// Observer hears of state changes and of certificates not found
	// good; given to CRL and OCSP when theirs is nil.
	Observer Observer
	// Now is the clock, given to CRL and OCSP when theirs is nil.
	Now func() time.Time
}

// Checker answers whether the leaf of a verified chain is revoked, and
// applies the policy. Its methods are safe for concurrent use.
type Checker struct {
	crl      *CRLChecker
	ocsp     *OCSPChecker
	policy   Policy
	observer Observer
}

// New builds a Checker; it reads no source (Run or Refresh does).
func New(opts Options) (*Checker, error) {
	if opts.CRL == nil && opts.OCSP == nil {
		return nil, errors.New("revocation checking needs CRL sources or OCSP")
	}
	policy, err := ParsePolicy(string(opts.Policy))
	if err != nil {
		return nil, err
	}
	c := &Checker{policy: policy, observer: opts.Observer}
	if c.observer == nil {
		c.observer = nopObserver{}
	}
	if opts.CRL != nil {
		o := *opts.CRL
		if o.Observer == nil {
			o.Observer = opts.Observer
		}
		if o.Now == nil {
			o.Now = opts.Now
		}
		if c.crl, err = NewCRLChecker(o); err != nil {
			return nil, err
		}
	}
	if opts.OCSP != nil {
		o := *opts.OCSP
		if o.Observer == nil {
			o.Observer = opts.Observer
		}
		if o.Now == nil {
			o.Now = opts.Now
		}
		if c.ocsp, err = NewOCSPChecker(o); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Close lets go of the idle connections to CRL sources and responders
// of the HTTP clients the checker made itself (not of one given in the
// options); call it when a reload replaces the checker. Run must have
// returned.
func (c *Checker) Close() {
	if c.crl != nil && c.crl.ownClient {
		c.crl.opts.HTTPClient.CloseIdleConnections()
	}
	if c.ocsp != nil && c.ocsp.ownClient {
		c.ocsp.opts.HTTPClient.CloseIdleConnections()
	}
}

// Policy is the policy the checker applies.
func (c *Checker) Policy() Policy { return c.policy }

// Refresh reads the CRL sources now (at start and on reload).
func (c *Checker) Refresh(ctx context.Context) error {
	if c.crl == nil {
		return nil
	}
	return c.crl.Refresh(ctx)
}

// Run reads the CRL sources and keeps them fresh until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	if c.crl != nil {
		c.crl.Run(ctx)
	}
}

// Check answers for the verified chains of one peer (each leaf first,
// then its issuer): revoked if any source says so for any chain, good
// if a source vouches for it, unknown otherwise. A chain of one
// certificate (a leaf trusted directly) is good: no CA can revoke it.
func (c *Checker) Check(ctx context.Context, chains [][]*smx509.Certificate) Result {
	pairs := make([][2]cert, 0, len(chains))
	for _, ch := range chains {
		switch len(ch) {
		case 0:
		case 1:
			pairs = append(pairs, [2]cert{fromSM(ch[0])})
		default:
			pairs = append(pairs, [2]cert{fromSM(ch[0]), fromSM(ch[1])})
		}
	}
	return c.check(ctx, pairs)
}

// CheckX509 is Check for chains verified by crypto/x509 (crypto/tls).
func (c *Checker) CheckX509(ctx context.Context, chains [][]*x509.Certificate) Result {
	pairs := make([][2]cert, 0, len(chains))
	for _, ch := range chains {
		switch len(ch) {
		case 0:
		case 1:
			pairs = append(pairs, [2]cert{fromX509(ch[0])})
		default:
			pairs = append(pairs, [2]cert{fromX509(ch[0]), fromX509(ch[1])})
		}
	}
	return c.check(ctx, pairs)
}

func (c *Checker) check(ctx context.Context, pairs [][2]cert) Result {
	if len(pairs) == 0 {
		return Result{Status: StatusUnknown, Detail: "no verified certificate chain"}
	}
	var good, unknown *Result
	for i, p := range pairs {
		if dupIssuer(pairs[:i], p) {
			continue
		}
		r := c.checkPair(ctx, p[0], p[1])
		switch r.Status {
		case StatusRevoked:
			return r
		case StatusGood:
			if good == nil {
				good = &r
			}
		default:
			if unknown == nil {
				unknown = &r
			}
		}
	}
	if good != nil {
		return *good
	}
	return *unknown
}

// dupIssuer reports whether an earlier chain had the same leaf issuer.
func dupIssuer(earlier [][2]cert, p [2]cert) bool {
	for _, e := range earlier {
		if bytes.Equal(e[1].raw, p[1].raw) {
			return true
		}
	}
	return false
}

// checkPair consults the CRLs, then (unless they found it revoked) the
// responder: revoked by either wins; good from either is good.
func (c *Checker) checkPair(ctx context.Context, leaf, issuer cert) Result {
	if issuer.raw == nil {
		return Result{Status: StatusGood, Serial: leaf.serial, Detail: "the certificate is trusted directly, not through a CA"}
	}
	var fromCRL Result
	if c.crl != nil {
		fromCRL = c.crl.check(leaf, issuer)
		if fromCRL.Status == StatusRevoked {
			return fromCRL
		}
	}
	if c.ocsp != nil {
		fromOCSP := c.ocsp.check(ctx, leaf, issuer)
		if fromOCSP.Status == StatusRevoked || fromOCSP.Status == StatusGood || c.crl == nil {
			return fromOCSP
		}
		if fromCRL.Status == StatusUnknown {
			fromCRL.Detail += "; " + fromOCSP.Source + ": " + fromOCSP.Detail
		}
	}
	return fromCRL
}

// Verify checks the chains and applies the policy: nil for a good
// certificate (or an unknown one under FailOpen), an *Error otherwise.
// It is what a VerifyConnection callback of tlcp returns, with the
// ConnectionState's VerifiedChains, on full and resumed handshakes.
// Without chains (no client certificate, as client_auth request or
// verify_if_given allow) there is nothing to revoke: nil.
func (c *Checker) Verify(ctx context.Context, chains [][]*smx509.Certificate) error {
	if len(chains) == 0 {
		return nil
	}
	return c.decide(c.Check(ctx, chains))
}

// VerifyTLCP is Verify for a TLCP peer, which holds two certificates:
// with the ConnectionState's PeerCertificates (signing certificate,
// encryption certificate when present, chain) and VerifiedChains (built
// from the signing certificate), it checks the signing certificate and
// also the encryption certificate against the same issuers, so that
// revoking either refuses the peer. The answer is the worse of the two.
func (c *Checker) VerifyTLCP(ctx context.Context, peer []*smx509.Certificate, chains [][]*smx509.Certificate) error {
	if len(chains) == 0 {
		return nil
	}
	sign := c.Check(ctx, chains)
	enc := encCertificate(peer)
	if sign.Status == StatusRevoked || enc == nil {
		return c.decide(sign)
	}
	var encChains [][]*smx509.Certificate
	for _, ch := range chains {
		if len(ch) > 1 && bytes.Equal(enc.RawIssuer, ch[1].RawSubject) {
			encChains = append(encChains, []*smx509.Certificate{enc, ch[1]})
		}
	}
	if len(encChains) == 0 {
		return c.decide(sign)
	}
	encResult := c.Check(ctx, encChains)
	if encResult.Status == StatusRevoked || sign.Status == StatusGood {
		return c.decide(encResult)
	}
	return c.decide(sign)
}

// encCertificate returns a TLCP peer's encryption certificate: the
// second certificate sent, when it is an end-entity certificate of the
// signing certificate's issuer (not the first of the chain).
func encCertificate(peer []*smx509.Certificate) *smx509.Certificate {
	if len(peer) < 2 {
		return nil
	}
	enc := peer[1]
	if enc.IsCA || !bytes.Equal(enc.RawIssuer, peer[0].RawIssuer) {
		return nil
	}
	return enc
}

// VerifyX509 is Verify for crypto/tls's VerifiedChains.
func (c *Checker) VerifyX509(ctx context.Context, chains [][]*x509.Certificate) error {
	if len(chains) == 0 {
		return nil
	}
	return c.decide(c.CheckX509(ctx, chains))
}

func (c *Checker) decide(r Result) error {
	switch {
	case r.Status == StatusGood:
		return nil
	case r.Status == StatusUnknown && c.policy == FailOpen:
		c.observer.Decided(r, false)
		return nil
	}
	c.observer.Decided(r, true)
	return &Error{Result: r}
}

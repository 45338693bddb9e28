package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// firstRefreshTimeout bounds the first read of a checker's CRLs when a
// generation is built: a reload waits that long at most for a CRL URL
// that does not answer (files are read at once).
const firstRefreshTimeout = 5 * time.Second

// revocationSet is a generation's revocation checkers by scope
// (revocationScope), and the problems building them found.
type revocationSet struct {
	check bool
	m     *observe.RevocationMetrics
	runs  map[string]*revocationRun
	probs []config.Problem
	// warnings are CRL files out of date: they refuse or admit (by the
	// policy) every certificate they cover until a new one is made.
	warnings []config.Problem
	// prev is the set in service, whose checkers are kept when their
	// settings and CAs are the same.
	prev *revocationSet
	// built are the checkers made so far by scope (nil for none or a
	// problem), so that the configurations of a scope share one.
	built map[string]*revocation.Checker
}

func newRevocationSet(check bool, prev *generation, m *observe.RevocationMetrics) *revocationSet {
	rs := &revocationSet{check: check, m: m, runs: map[string]*revocationRun{}, built: map[string]*revocation.Checker{}}
	if prev != nil {
		rs.prev = prev.revocation
	}
	return rs
}

// revocationRun is one checker and what runs it.
type revocationRun struct {
	scope string
	key   [sha256.Size]byte
	chk   *revocation.Checker
	// cancel and done stop Run (nil until started).
	cancel context.CancelFunc
	done   chan struct{}
}

// siteScope names the checker of a site's client certificates for one
// protocol in metrics and logs: LISTENER/tlcp, LISTENER/SITE/tls.
func siteScope(sp siteSpec, protocol string) string { return sp.source() + "/" + protocol }

// checker returns the revocation checker of a scope, built from rc (at
// the field path) with the CAs of caFiles (empty names are left out) as
// the CRLs' issuers; a problem with a CRL file is kept in the set's
// problems. It reuses the checker in service when nothing it was built
// from changed, and reads its CRLs again, and always with keep (the
// configuration it was hooked into is kept too); a new one reads them
// before it serves. Nil for a nil rc, or when a problem was found. The
// checker of a scope is built once per set: a second call returns the
// first one's (a tls section's crypto/tls and SM2 sides share one).
func (rs *revocationSet) checker(s *Server, scope, path string, rc *config.Revocation, caFiles []string, cfg *config.Config, keep bool) *revocation.Checker {
	if chk, ok := rs.built[scope]; ok {
		return chk
	}
	chk := rs.build(s, scope, path, rc, caFiles, cfg, keep)
	rs.built[scope] = chk
	return chk
}

func (rs *revocationSet) build(s *Server, scope, path string, rc *config.Revocation, caFiles []string, cfg *config.Config, keep bool) *revocation.Checker {
	if rc == nil {
		return nil
	}
	caFiles = slices.DeleteFunc(slices.Clone(caFiles), func(f string) bool { return f == "" })
	var caPEM []byte
	var issuers []*smx509.Certificate
	for _, caFile := range caFiles {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil // the CA file's own problem is reported
		}
		caPEM = append(caPEM, data...)
		issuers = append(issuers, pemCertificates(data)...)
	}
	caFile := strings.Join(caFiles, " ")
	bad := false
	for i, src := range rc.CRL {
		if config.RevocationURL(src) {
			continue
		}
		crl, msg, fix := crlFileProblem(src, issuers, caFile != "")
		if msg != "" {
			rs.probs = append(rs.probs, cfg.Problem(fmt.Sprintf("%s.crl[%d]", path, i), msg, fix))
			bad = true
		} else if crl != nil {
			if err := crl.CheckTime(time.Now(), max(graceOf(rc), 0)); err != nil {
				rs.warnings = append(rs.warnings, cfg.Problem(fmt.Sprintf("%s.crl[%d]", path, i),
					fmt.Sprintf("CRL file %s: %v, so the certificates of its CA have an unknown revocation status (policy %s)", src, err, rc.Policy),
					"make a new CRL (gmgate cert crl --ca DIR) and reload"))
			}
		}
	}
	if bad || rs.check {
		return nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %v %q %v %v %q\n", scope, rc.CRL, rc.OCSP, rc.Policy, rc.Refresh, graceOf(rc), caFile)
	h.Write(caPEM)
	var key [sha256.Size]byte
	h.Sum(key[:0])
	ctx, cancel := context.WithTimeout(context.Background(), firstRefreshTimeout)
	defer cancel()
	if rs.prev != nil {
		if old := rs.prev.runs[scope]; old != nil && (old.key == key || keep) {
			rs.runs[scope] = old
			if err := old.chk.Refresh(ctx); err != nil {
				s.log.Warn("CRLs not read again on reload; the last good ones stay", "scope", scope, "cause", err.Error())
			}
			return old.chk
		}
	}
	obs := &revocationObserver{scope: scope, log: s.log, m: rs.m, states: map[string]revocation.SourceState{}}
	chk, err := revocation.New(checkerOptions(rc, issuers, obs))
	if err != nil {
		rs.probs = append(rs.probs, cfg.Problem(path, err.Error(), ""))
		return nil
	}
	if err := chk.Refresh(ctx); err != nil {
		s.log.Warn("CRLs not read; certificates they cover have an unknown revocation status until they are", "scope", scope, "policy", rc.Policy, "cause", err.Error())
	}
	rs.runs[scope] = &revocationRun{scope: scope, key: key, chk: chk}
	return chk
}

// upstreamRevocation gives the https:// and tlcp:// pools with a
// revocation section their checker. A pool kept from prev keeps the
// checker it has, which the set keeps too (same settings, same CAs).
func (s *Server) upstreamRevocation(cfg *config.Config, prev *generation, gen *generation) {
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		uc, p := cfg.Upstreams[name], gen.pools[name]
		if uc == nil || p == nil {
			continue
		}
		var rc *config.Revocation
		var field, caFile string
		switch {
		case p.Scheme == "https" && uc.TLS != nil:
			rc, field, caFile = uc.TLS.Revocation, "tls.revocation", uc.TLS.CA
		case p.Scheme == "tlcp" && uc.TLCP != nil:
			rc, field, caFile = uc.TLCP.Revocation, "tlcp.revocation", uc.TLCP.CA
		case p.Scheme == config.SchemeTLS13SM && uc.TLS13SM != nil:
			rc, field, caFile = uc.TLS13SM.Revocation, "tls13sm.revocation", uc.TLS13SM.CA
		}
		kept := prev != nil && prev.pools[name] == p
		chk := gen.revocation.checker(s, upstream.Source(name), config.Field(uc.Path(), field), rc, []string{caFile}, cfg, kept)
		if chk == nil || kept {
			continue
		}
		p.CheckServerCertificates(verifyTLSRevocation(chk), verifyTLCPRevocation(chk), verifyTLS13Revocation(chk))
	}
}

// graceOf is a section's grace as the checker takes it: negative for
// none.
func graceOf(rc *config.Revocation) time.Duration {
	switch {
	case rc.Grace == nil:
		return config.DefaultRevocationGrace
	case *rc.Grace == 0:
		return -1
	}
	return rc.Grace.D()
}

func checkerOptions(rc *config.Revocation, issuers []*smx509.Certificate, obs revocation.Observer) revocation.Options {
	opts := revocation.Options{Policy: revocation.Policy(rc.Policy), Observer: obs}
	if len(rc.CRL) > 0 {
		opts.CRL = &revocation.CRLOptions{Sources: rc.CRL, Issuers: issuers, Refresh: rc.Refresh.D(), Grace: graceOf(rc)}
	}
	if rc.OCSP != config.RevocationOCSPOff {
		opts.OCSP = &revocation.OCSPOptions{Responder: rc.OCSPResponder(), Grace: graceOf(rc)}
	}
	return opts
}

// crlFileProblem reads a CRL file as the checker will and says what is
// wrong with it: unreadable, too large, not a CRL, or (when the CAs are
// known) signed by none of them. It returns the CRL when it was parsed.
func crlFileProblem(file string, issuers []*smx509.Certificate, checkIssuer bool) (crl *revocation.CRL, msg, fix string) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Sprintf("CRL file: %v", err), "give the path of a CRL file (PEM or DER) that gmgate may read, such as the crl.pem that gmgate cert crl writes"
	}
	if st.Size() > revocation.DefaultMaxCRLBytes {
		return nil, fmt.Sprintf("CRL file %s is %d bytes, more than the %d allowed", file, st.Size(), revocation.DefaultMaxCRLBytes), "give the CA's complete CRL; a CRL this large is not one gmgate takes"
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Sprintf("CRL file: %v", err), "check that gmgate may read it"
	}
	if !checkIssuer {
		return nil, "", ""
	}
	if crl, err = revocation.ParseCRL(data, issuers); err != nil {
		return nil, fmt.Sprintf("CRL file %s: %v", file, err), "give the CRL that a CA of the section's CA file issues (gmgate cert crl --ca DIR writes one), or add the CRL's issuing CA to that file"
	}
	return crl, "", ""
}

// pemCertificates parses the certificates of a PEM file, skipping what
// does not parse (the CA file's own check reports it).
func pemCertificates(data []byte) []*smx509.Certificate {
	var out []*smx509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := smx509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// start runs the checkers that prev did not run already.
func (rs *revocationSet) start(prev *generation) {
	for scope, run := range rs.runs {
		if prev != nil && prev.revocation != nil && prev.revocation.runs[scope] == run {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		run.cancel, run.done = cancel, make(chan struct{})
		go func() {
			defer close(run.done)
			run.chk.Run(ctx)
		}()
	}
}

// release stops the checkers keep does not share, and forgets the
// metrics of scopes keep has not.
func (rs *revocationSet) release(keep *generation) {
	if rs == nil {
		return
	}
	for scope, run := range rs.runs {
		var kept *revocationRun
		if keep != nil && keep.revocation != nil {
			kept = keep.revocation.runs[scope]
		}
		if kept == run {
			continue
		}
		if run.cancel != nil {
			run.cancel()
			<-run.done
		}
		run.chk.Close()
		if kept == nil {
			rs.m.Forget(scope)
		}
	}
}

// verifyTimeout bounds the wait of one handshake for its revocation
// answer (an OCSP responder's, or a place among the requests in flight):
// the callbacks get no handshake context.
const verifyTimeout = revocation.DefaultOCSPTimeout + time.Second

// verifyTLCPRevocation returns a VerifyConnection that checks a TLCP
// peer's signing and encryption certificates, on full and resumed
// handshakes.
func verifyTLCPRevocation(chk *revocation.Checker) func(tlcp.ConnectionState) error {
	return func(cs tlcp.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
		defer cancel()
		return chk.VerifyTLCP(ctx, cs.PeerCertificates, cs.VerifiedChains)
	}
}

// verifyTLS13Revocation is verifyTLCPRevocation for TLS 1.3 ShangMi,
// whose peer has one certificate: its chains are checked, on full and
// resumed handshakes; a refusal is answered with the alert the checker's
// error names (certificate_revoked, certificate_unknown).
func verifyTLS13Revocation(chk *revocation.Checker) func(tls13.ConnectionState) error {
	return func(cs tls13.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
		defer cancel()
		return chk.Verify(ctx, cs.VerifiedChains)
	}
}

// verifyTLSRevocation is verifyTLCPRevocation for crypto/tls, which
// calls VerifyConnection on resumption too. crypto/tls answers every
// error of it with bad_certificate, and says so in no error: the
// handshake's metrics and log learn it from the wrapping.
func verifyTLSRevocation(chk *revocation.Checker) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
		defer cancel()
		if err := chk.VerifyX509(ctx, cs.VerifiedChains); err != nil {
			return &observe.SentAlertError{Alert: "bad_certificate", Err: err}
		}
		return nil
	}
}

// revocationObserver turns a checker's reports into metrics and log
// lines.
type revocationObserver struct {
	scope string
	log   *slog.Logger
	m     *observe.RevocationMetrics

	mu     sync.Mutex
	states map[string]revocation.SourceState
}

var _ revocation.Observer = (*revocationObserver)(nil)

func (o *revocationObserver) SourceChanged(source string, st revocation.SourceState, err error) {
	o.mu.Lock()
	o.states[source] = st
	counts := map[string]int{}
	for _, s := range []revocation.SourceState{revocation.SourceOK, revocation.SourceFailing, revocation.SourceStale, revocation.SourceExpired} {
		counts[s.String()] = 0
	}
	for _, s := range o.states {
		counts[s.String()]++
	}
	o.mu.Unlock()
	o.m.SetSources(o.scope, counts)
	if st == revocation.SourceOK {
		o.log.Info("revocation source ok", "scope", o.scope, "source", source)
		return
	}
	attrs := []any{"scope", o.scope, "source", source, "state", st.String()}
	if err != nil {
		attrs = append(attrs, "cause", err.Error())
	}
	o.log.Warn("revocation source "+st.String(), attrs...)
}

// Decided counts a certificate not found good; the refusal itself is
// logged with the failed handshake, whose cause is the checker's answer.
func (o *revocationObserver) Decided(r revocation.Result, refused bool) {
	if refused {
		o.m.Refused(o.scope, r.Status.String())
		return
	}
	o.m.AdmittedUnknown(o.scope)
	o.log.Debug("certificate admitted with an unknown revocation status (policy fail_open)", "scope", o.scope, "result", r.String())
}

package revocation

import (
	"sort"
	"time"
)

// SourceReport is what a checker knows of one CRL source or OCSP
// responder, for the admin API. It names the source as logs do: a file
// by its path, a URL without user information, query or fragment.
type SourceReport struct {
	// Kind is "crl" or "ocsp".
	Kind string
	// Source is the file or the redacted URL; for OCSP without a
	// configured responder and before any certificate named one, "aia".
	Source string
	// State is ok, failing, stale or expired (SourceState); for a
	// responder not asked yet, "not_asked".
	State string
	// ThisUpdate and NextUpdate are the loaded CRL's (zero without one).
	ThisUpdate, NextUpdate time.Time
	// Revoked counts the loaded CRL's entries.
	Revoked int
	// LastFetch is when the source was last read or asked, LastSuccess
	// when it last answered usefully (zero: never).
	LastFetch, LastSuccess time.Time
	// LastError is why the last read failed, "" when it did not; it
	// names URLs redacted.
	LastError string
}

// RedactSource names a CRL source or responder as reports and logs do:
// a file by its path, a URL without user information, query or
// fragment, which may carry credentials.
func RedactSource(source string) string { return redact(source) }

// fetchOutcome is the last read of a CRL source.
type fetchOutcome struct {
	at, succeeded time.Time
	err           string
}

// responderStatus is what the last request to an OCSP responder left.
type responderStatus struct {
	state           SourceState
	asked, answered time.Time
	lastErr         string
}

// maxReportedResponders bounds the OCSP responders a report lists (they
// come from the certificates clients send).
const maxReportedResponders = 50

// Sources reports the checker's CRL sources, then its OCSP responders.
// It does not wait for a refresh in progress.
func (c *Checker) Sources() []SourceReport {
	var out []SourceReport
	if c.crl != nil {
		out = append(out, c.crl.reports()...)
	}
	if c.ocsp != nil {
		out = append(out, c.ocsp.reports()...)
	}
	return out
}

func (c *CRLChecker) reports() []SourceReport {
	now := c.opts.Now()
	out := make([]SourceReport, 0, len(c.sources))
	for _, s := range c.sources {
		r := SourceReport{Kind: "crl", Source: s.name}
		crl := s.current.Load()
		if crl != nil {
			r.ThisUpdate, r.NextUpdate, r.Revoked = crl.ThisUpdate, crl.NextUpdate, len(crl.revoked)
		}
		failing := false
		if f := s.fetched.Load(); f != nil {
			r.LastFetch, r.LastSuccess, r.LastError = f.at, f.succeeded, f.err
			failing = f.err != ""
		}
		switch {
		case crl == nil || now.After(crl.NextUpdate.Add(c.opts.Grace)):
			r.State = SourceExpired.String()
		case now.After(crl.NextUpdate):
			r.State = SourceStale.String()
		case failing:
			r.State = SourceFailing.String()
		default:
			r.State = SourceOK.String()
		}
		out = append(out, r)
	}
	return out
}

func (o *OCSPChecker) reports() []SourceReport {
	o.mu.Lock()
	out := make([]SourceReport, 0, min(len(o.states), maxReportedResponders)+1)
	for responder, st := range o.states {
		out = append(out, SourceReport{
			Kind: "ocsp", Source: redact(responder), State: st.state.String(),
			LastFetch: st.asked, LastSuccess: st.answered, LastError: st.lastErr,
		})
	}
	o.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	if len(out) > maxReportedResponders {
		out = out[:maxReportedResponders]
	}
	if len(out) == 0 || (o.opts.Responder != "" && !hasSource(out, redact(o.opts.Responder))) {
		name := "aia"
		if o.opts.Responder != "" {
			name = redact(o.opts.Responder)
		}
		out = append(out, SourceReport{Kind: "ocsp", Source: name, State: "not_asked"})
	}
	return out
}

func hasSource(rs []SourceReport, name string) bool {
	for _, r := range rs {
		if r.Source == name {
			return true
		}
	}
	return false
}

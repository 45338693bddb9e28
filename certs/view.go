package certs

import (
	"crypto/tls"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/revocation"
)

// ServedCertificate is one certificate the store serves, with its role
// and the kind of key backend behind it: what the admin API lists.
type ServedCertificate struct {
	// Source is the source's name, Role sign, enc, tls or sm2.
	Source, Role string
	Leaf         *smx509.Certificate
	// KeyBackend is "file" or "sdf": the scheme of the key reference,
	// never the reference itself (it may name a PIN file).
	KeyBackend string
	// Staple is the OCSP stapling of the certificate; nil when it is
	// not stapled (stapling off, no responder named, or the enc role,
	// which is never stapled).
	Staple *StapleReport
}

// StapleReport is the OCSP stapling state of one served certificate.
type StapleReport struct {
	// State is StapleGood, StaplePending, StapleRevoked, StapleUnknown,
	// StapleFailed or StapleNoIssuer.
	State string
	// NextUpdate is the stapled answer's (zero while none is).
	NextUpdate time.Time
	// Responder is the URL asked, without user information or query.
	Responder string
	// FetchFailures counts the failed requests to the responder.
	FetchFailures uint64
}

// report is the record's state at now.
func (r *stapleRecord) report(now time.Time) *StapleReport {
	if r == nil {
		return nil
	}
	state, st := r.stateAt(now)
	rep := &StapleReport{State: state, FetchFailures: r.failures.Load()}
	if r.leaf != nil && len(r.leaf.OCSPServer) > 0 {
		rep.Responder = revocation.RedactSource(r.leaf.OCSPServer[0])
	}
	if st != nil {
		rep.NextUpdate, rep.Responder = st.NextUpdate, st.Responder
	}
	return rep
}

// Served returns the certificates in service, by source in configuration
// order: sign and enc of each TLCP pair, then the TLS leaf, then the SM2
// leaf for TLS 1.3 ShangMi.
func (s *Store) Served() []ServedCertificate {
	var out []ServedCertificate
	set := s.current.Load()
	if set == nil {
		return nil
	}
	bySource := map[string]Source{}
	for _, src := range s.sources {
		bySource[src.Name] = src
	}
	now := time.Now()
	for _, e := range set.entries {
		src := bySource[e.name]
		if e.tlcp != nil && src.TLCP != nil {
			if e.tlcp.SignLeaf != nil {
				sc := ServedCertificate{Source: e.name, Role: "sign", Leaf: e.tlcp.SignLeaf, KeyBackend: keyBackend(src.TLCP.SignKey)}
				if e.tlcpStaple != nil {
					sc.Staple = e.tlcpStaple.record.report(now)
				}
				out = append(out, sc)
			}
			if e.tlcp.EncLeaf != nil {
				out = append(out, ServedCertificate{Source: e.name, Role: "enc", Leaf: e.tlcp.EncLeaf, KeyBackend: keyBackend(src.TLCP.EncKey)})
			}
		}
		if leaf := tlsLeaf(e.tls); leaf != nil && src.TLS != nil {
			sc := ServedCertificate{Source: e.name, Role: "tls", Leaf: leaf, KeyBackend: keyBackend(src.TLS.Key)}
			if e.tlsStaple != nil {
				sc.Staple = e.tlsStaple.record.report(now)
			}
			out = append(out, sc)
		}
		if e.sm2 != nil && e.sm2.SignLeaf != nil && src.SM2 != nil {
			out = append(out, ServedCertificate{Source: e.name, Role: "sm2", Leaf: e.sm2.SignLeaf, KeyBackend: keyBackend(src.SM2.Key)})
		}
	}
	return out
}

func tlsLeaf(c *tls.Certificate) *smx509.Certificate {
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	leaf, err := smx509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// keyBackend is the backend a key reference names: sdf for sdf:…,
// file otherwise (file:… or a plain path).
func keyBackend(ref string) string {
	if strings.HasPrefix(ref, "sdf:") {
		return "sdf"
	}
	return "file"
}

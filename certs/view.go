package certs

import (
	"crypto/tls"
	"strings"

	"github.com/emmansun/gmsm/smx509"
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
	for _, e := range set.entries {
		src := bySource[e.name]
		if e.tlcp != nil && src.TLCP != nil {
			if e.tlcp.SignLeaf != nil {
				out = append(out, ServedCertificate{e.name, "sign", e.tlcp.SignLeaf, keyBackend(src.TLCP.SignKey)})
			}
			if e.tlcp.EncLeaf != nil {
				out = append(out, ServedCertificate{e.name, "enc", e.tlcp.EncLeaf, keyBackend(src.TLCP.EncKey)})
			}
		}
		if leaf := tlsLeaf(e.tls); leaf != nil && src.TLS != nil {
			out = append(out, ServedCertificate{e.name, "tls", leaf, keyBackend(src.TLS.Key)})
		}
		if e.sm2 != nil && e.sm2.SignLeaf != nil && src.SM2 != nil {
			out = append(out, ServedCertificate{e.name, "sm2", e.sm2.SignLeaf, keyBackend(src.SM2.Key)})
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

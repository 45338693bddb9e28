package route

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/tlcp"
)

// Certificates gives the certificates a site serves, by its source name
// (certs.Store does).
type Certificates interface {
	TLCPCertificate(source string) *tlcp.Certificate
	TLSCertificate(source string) *tls.Certificate
	SM2Certificate(source string) *tlcp.Certificate
}

// CertificateHostWarnings warns about the hosts of a listener's sites
// that a site's own certificates do not name: the TLCP signing
// certificate (the one a TLCP client verifies the name against), the TLS
// certificate, the SM2 certificate of tls.sm2, or the domains an ACME
// certificate is obtained for. A
// client that checks the name then refuses the handshake.
//
// It is a warning, not a problem: the gateway cannot know how its clients
// check, and some deliberately do not (TLCP clients that verify the chain
// alone, as GmSSL's do by default; clients that pin the certificate; test
// set-ups reached by address), and configurations that served before
// keep serving. IP addresses in hosts are warned about by
// SiteHostWarnings and not looked at here.
func CertificateHostWarnings(cfg *config.Config, lc *config.Listener, sites []*Site, certs Certificates) []config.Problem {
	confs := lc.SiteList()
	var out []config.Problem
	for j, site := range sites {
		if j >= len(confs) || len(confs[j].Hosts) == 0 {
			continue
		}
		sc := confs[j]
		var tlcpLeaf, tlsLeaf, sm2Leaf *x509.Certificate
		if site.TLS13 != nil && sc.TLS != nil && sc.TLS.SM2 != nil && certs != nil {
			if c := certs.SM2Certificate(site.Source); c != nil && c.SignLeaf != nil {
				sm2Leaf = &x509.Certificate{DNSNames: c.SignLeaf.DNSNames, Subject: c.SignLeaf.Subject}
			}
		}
		if site.TLCP != nil && certs != nil {
			if c := certs.TLCPCertificate(site.Source); c != nil && c.SignLeaf != nil {
				// Only the names are read.
				tlcpLeaf = &x509.Certificate{DNSNames: c.SignLeaf.DNSNames, Subject: c.SignLeaf.Subject}
			}
		}
		var acmeDomains []string
		if site.TLS != nil && sc.TLS != nil {
			if sc.TLS.ACME != nil {
				acmeDomains = sc.TLS.ACME.Domains
			} else if certs != nil {
				if c := certs.TLSCertificate(site.Source); c != nil {
					tlsLeaf = c.Leaf
				}
			}
		}
		for k, h := range sc.Hosts {
			if net.ParseIP(h) != nil {
				continue
			}
			pattern := hostname.Pattern(h)
			var missing []string
			if tlcpLeaf != nil && !certificateNames(tlcpLeaf, pattern) {
				missing = append(missing, "the TLCP signing certificate "+sc.TLCP.SignCert+" ("+describeNames(tlcpLeaf)+")")
			}
			if tlsLeaf != nil && !certificateNames(tlsLeaf, pattern) {
				missing = append(missing, "the TLS certificate "+sc.TLS.Cert+" ("+describeNames(tlsLeaf)+")")
			}
			if sm2Leaf != nil && !certificateNames(sm2Leaf, pattern) {
				missing = append(missing, "the SM2 certificate "+sc.TLS.SM2.Cert+" ("+describeNames(sm2Leaf)+")")
			}
			if sc.TLS != nil && sc.TLS.ACME != nil && site.TLS != nil && !acmeNames(acmeDomains, pattern) {
				missing = append(missing, "the ACME certificate (for "+strings.Join(acmeDomains, ", ")+")")
			}
			if len(missing) == 0 {
				continue
			}
			dns := h
			if strings.HasPrefix(h, "*") {
				dns = "'" + h + "'"
			}
			fix := "issue the certificate with this name too (gmgate cert issue --dns " + dns + " besides the others), or list the name under a site whose certificate names it"
			if len(missing) == 1 && strings.HasPrefix(missing[0], "the ACME") {
				fix = "add it to tls.acme.domains, or list it under a site whose certificate names it"
				if strings.HasPrefix(pattern, "*") {
					fix = "ACME here cannot obtain wildcard certificates: list the names themselves in hosts and tls.acme.domains, or serve the wildcard from a certificate file (tls.cert)"
				}
			}
			out = append(out, cfg.Problem(fmt.Sprintf("%s.hosts[%d]", sc.Path(), k),
				fmt.Sprintf("%q is not named by %s: a client that checks the server's name refuses the handshake", h, strings.Join(missing, " nor by ")),
				fix))
		}
	}
	return out
}

// certificateNames reports whether a certificate names a site's host
// pattern (hostname.Pattern): an exact name is named by the same name or
// by a wildcard for its parent (RFC 6125: the wildcard stands for one
// whole label); a wildcard host only by the same wildcard, since a
// certificate for some names below it leaves the others out. The subject
// CN is not read, as clients that follow RFC 6125 (Go, browsers, curl)
// do not read it when the certificate has DNS names, and newer ones never.
func certificateNames(leaf *x509.Certificate, pattern string) bool {
	for _, n := range leaf.DNSNames {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if n == pattern {
			return true
		}
		if parent, ok := strings.CutPrefix(n, "*."); ok && !strings.HasPrefix(pattern, "*") {
			label, rest, found := strings.Cut(pattern, ".")
			if found && label != "" && rest == parent {
				return true
			}
		}
	}
	return false
}

// acmeNames reports whether an ACME certificate for domains names a
// site's host pattern.
func acmeNames(domains []string, pattern string) bool {
	for _, d := range domains {
		if strings.ToLower(strings.TrimSuffix(d, ".")) == pattern {
			return true
		}
	}
	return false
}

// describeNames says which names a certificate is for, for a warning.
func describeNames(leaf *x509.Certificate) string {
	if len(leaf.DNSNames) == 0 {
		if leaf.Subject.CommonName != "" {
			return "no DNS name; its subject CN " + leaf.Subject.CommonName + " is not read by clients that follow RFC 6125"
		}
		return "no DNS name"
	}
	const most = 4
	names := leaf.DNSNames
	if len(names) > most {
		return "names " + strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return "names " + strings.Join(names, ", ")
}

// Package chain reads a certificate chain file (leaf first, then its
// intermediates) and checks it as gmgate serves it: the leaf's dates
// and extended key usage, the order of the chain and, given roots, the
// path to one of them. It is shared by the runtime loader (package
// certs) and the offline tools (package certs/pki); it must not open
// keys.
package chain

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// Load reads the certificate chain file path (named by field in errors)
// and checks the leaf's dates (at now(), or the time now) and extended key
// usage and the order of the chain; with roots, it verifies the chain to
// one of them.
func Load(field, path string, roots []*smx509.Certificate, now func() time.Time) ([]*smx509.Certificate, error) {
	if strings.TrimSpace(path) == "" {
		return nil, fmt.Errorf("%s is not set; give the path of the PEM certificate file", field)
	}
	chain, err := pemfile.ReadCertificates(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, certinfo.MissingFile(field, path, "the PEM certificate file")
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%s %s: %w", field, path, certinfo.ExplainPermission(fs.ErrPermission))
	}
	if err != nil {
		return nil, fmt.Errorf("%s %w", field, err)
	}
	leaf := chain[0]
	t := certinfo.Now(now)
	if t.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%s %s expired on %s (%s ago); renew it (gmgate cert issue, or ask your CA) and reload", field, path, leaf.NotAfter.UTC().Format(time.RFC3339), certinfo.Ago(t.Sub(leaf.NotAfter)))
	}
	if t.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("%s %s is not valid until %s; check the system clock, or wait until then", field, path, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if leaf.IsCA && leaf.BasicConstraintsValid {
		return nil, fmt.Errorf("%s %s starts with a CA certificate (%q), not a server certificate; put the server's certificate first and its intermediates after it", field, path, leaf.Subject.String())
	}
	if len(leaf.ExtKeyUsage) > 0 && !certinfo.HasEKU(leaf, smx509.ExtKeyUsageServerAuth) && !certinfo.HasEKU(leaf, smx509.ExtKeyUsageClientAuth) && !certinfo.HasEKU(leaf, smx509.ExtKeyUsageAny) {
		return nil, fmt.Errorf("%s %s has extended key usage %s without serverAuth or clientAuth; reissue it with serverAuth", field, path, certinfo.EKUString(leaf.ExtKeyUsage))
	}
	for i := 1; i < len(chain); i++ {
		child, parent := chain[i-1], chain[i]
		if string(child.RawIssuer) != string(parent.RawSubject) {
			return nil, fmt.Errorf("%s %s: certificate %d (%q) is not the issuer of certificate %d (issued by %q); order the file leaf first, then each issuer", field, path, i+1, parent.Subject.String(), i, child.Issuer.String())
		}
		if err := child.CheckSignatureFrom(parent); err != nil {
			if certinfo.SignedWithEmptyID(child, parent) {
				return nil, fmt.Errorf("%s %s: certificate %d (%q): %s", field, path, i, child.Subject.String(), certinfo.EmptyIDAdvice)
			}
			return nil, fmt.Errorf("%s %s: certificate %d (%q) is not signed by certificate %d (%q): %v", field, path, i, child.Subject.String(), i+1, parent.Subject.String(), err)
		}
	}
	if len(roots) > 0 {
		if err := verifyChain(chain, roots, t); err != nil {
			return nil, fmt.Errorf("%s %s: %w", field, path, err)
		}
	}
	return chain, nil
}

// verifyChain verifies chain[0] with chain[1:] as intermediates against
// roots, and explains the usual failures.
func verifyChain(chain []*smx509.Certificate, roots []*smx509.Certificate, t time.Time) error {
	pool := smx509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	inter := smx509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(smx509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: t, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageAny}})
	if err == nil {
		return nil
	}
	last := chain[len(chain)-1]
	for _, r := range roots {
		if string(r.RawSubject) == string(last.RawIssuer) {
			if certinfo.SignedWithEmptyID(last, r) {
				return fmt.Errorf("certificate %q: %s", last.Subject.String(), certinfo.EmptyIDAdvice)
			}
			if string(r.Raw) != string(last.Raw) && last.CheckSignatureFrom(r) != nil {
				if len(last.AuthorityKeyId) > 0 && len(r.SubjectKeyId) > 0 && string(last.AuthorityKeyId) != string(r.SubjectKeyId) {
					return fmt.Errorf("certificate %q was issued by another CA of the name %q than the trusted one (its issuer's key id %X, the trusted CA's %X): trust the CA certificate that issued it, or reissue it from the trusted CA", last.Subject.String(), r.Subject.String(), last.AuthorityKeyId, r.SubjectKeyId)
				}
				return fmt.Errorf("certificate %q names issuer %q but its signature does not verify with that root's key (the root was replaced?): %v", last.Subject.String(), r.Subject.String(), err)
			}
			return fmt.Errorf("does not verify against the trusted roots: %v", err)
		}
	}
	if string(last.RawIssuer) != string(last.RawSubject) {
		return UnknownIssuer(chain, roots)
	}
	return fmt.Errorf("does not verify against the trusted roots (its root %q is not trusted): %v", last.Subject.String(), err)
}

// UnknownIssuer explains a chain whose last certificate's issuer is none
// of the roots, by name or key id. Two mistakes look alike there: the
// wrong CA trusted, and an intermediate left out of the file. The key id
// and the file tell them apart as far as they can: a root with the
// issuer's key but another name is a renamed CA; a file that holds
// intermediates already stops at one whose issuer is missing; a leaf
// alone was issued by a CA that is not trusted, root or intermediate.
func UnknownIssuer(chain, roots []*smx509.Certificate) error {
	last := chain[len(chain)-1]
	if len(last.AuthorityKeyId) > 0 {
		for _, r := range roots {
			if string(r.SubjectKeyId) == string(last.AuthorityKeyId) {
				return fmt.Errorf("the issuer %q of %q has the key of the trusted CA %q under another name: the CA was reissued with a new name; reissue the certificate from it, or trust the CA certificate with the name %q", last.Issuer.String(), last.Subject.String(), r.Subject.String(), last.Issuer.String())
			}
		}
	}
	trusted := rootNames(roots)
	if len(chain) > 1 {
		return fmt.Errorf("unknown issuer: the chain in the file stops at the intermediate %q, and its issuer %q is none of the trusted CAs (%s); append that issuer's certificate to the file if it is another intermediate, or trust the root CA that issued it", last.Subject.String(), last.Issuer.String(), trusted)
	}
	return fmt.Errorf("unknown issuer: the issuer %q%s of %q is none of the trusted CAs, by name or key id (trusted: %s); if %q is a root CA, trust its certificate instead (the CA given is the wrong one); if it is an intermediate CA, append its certificate to the file (leaf first, then intermediates)", last.Issuer.String(), keyID(last.AuthorityKeyId), last.Subject.String(), trusted, last.Issuer.String())
}

// rootNames lists the roots' names and key ids for a message, at most
// three.
func rootNames(roots []*smx509.Certificate) string {
	var names []string
	for i, r := range roots {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(roots)-3))
			break
		}
		names = append(names, fmt.Sprintf("%q%s", r.Subject.String(), keyID(r.SubjectKeyId)))
	}
	return strings.Join(names, ", ")
}

// keyID is " (key id HEX)" for a key id, "" without one.
func keyID(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	return fmt.Sprintf(" (key id %X)", id)
}

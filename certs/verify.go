package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// VerifyOptions configure VerifyFiles.
type VerifyOptions struct {
	// Roots are the trusted CA certificates (required).
	Roots []*smx509.Certificate
	// Host, when set, must be named by the certificate (DNS name or IP).
	Host string
	// EncCert, when set, is the encryption certificate of a TLCP pair; it
	// is verified too and compared with the signing certificate.
	EncCert string
	Now     func() time.Time
}

// VerifyFiles verifies the certificate in certFile (leaf first, then
// intermediates) against the roots, checks the host name, and for a TLCP
// pair verifies the encryption certificate and the pair's identity. It
// returns lines describing what was checked, or the first failure.
func VerifyFiles(certFile string, opts VerifyOptions) ([]string, error) {
	if len(opts.Roots) == 0 {
		return nil, errors.New("no trusted roots; give the CA certificate with --ca")
	}
	t := now(opts.Now)
	var out []string
	check := func(field, path string) (*smx509.Certificate, error) {
		chain, err := loadCertChain(field, path, LoadOptions{Roots: opts.Roots, Now: opts.Now})
		if err != nil {
			return nil, err
		}
		leaf := chain[0]
		pool, inter := smx509.NewCertPool(), smx509.NewCertPool()
		for _, r := range opts.Roots {
			pool.AddCert(r)
		}
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		chains, err := leaf.Verify(smx509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: t, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageAny}})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", field, path, err)
		}
		desc := ""
		for i, c := range chains[0] {
			if i > 0 {
				desc += " <- "
			}
			desc += fmt.Sprintf("%q", c.Subject.String())
		}
		out = append(out, fmt.Sprintf("%s: chain OK: %s", path, desc))
		if opts.Host != "" {
			if err := leaf.VerifyHostname(opts.Host); err != nil {
				return nil, fmt.Errorf("%s does not name host %q (it names %s); reissue it with that name (gmgate cert issue --dns/--ip)", path, opts.Host, sanString(leaf))
			}
			out = append(out, fmt.Sprintf("%s: host %q OK", path, opts.Host))
		}
		return leaf, nil
	}
	sign, err := check("cert", certFile)
	if err != nil {
		return nil, err
	}
	if opts.EncCert == "" {
		return out, nil
	}
	enc, err := check("enc_cert", opts.EncCert)
	if err != nil {
		return nil, err
	}
	if string(sign.RawSubject) != string(enc.RawSubject) {
		return nil, fmt.Errorf("%s and %s have different subjects (%q, %q); GmSSL peers reject such a pair", certFile, opts.EncCert, sign.Subject.String(), enc.Subject.String())
	}
	if looksLikeEnc(sign) || looksLikeSign(enc) {
		return nil, fmt.Errorf("%s (key usage %s) and %s (key usage %s) look swapped: give the signing certificate first and the encryption certificate with --enc", certFile, keyUsageString(sign.KeyUsage), opts.EncCert, keyUsageString(enc.KeyUsage))
	}
	out = append(out, "pair OK: same subject, signing and encryption usages in place")
	return out, nil
}

// ParseCABundle parses a file of CA certificates (PEM, or one DER
// certificate) that was read from file, as ReadRoots does: a damaged PEM
// block, a certificate that does not parse, or a file without any
// certificate is an error that names the file (and the block and its
// line) and the fix, never a CA left out without a word.
func ParseCABundle(file string, data []byte) ([]*smx509.Certificate, error) {
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return certs, nil
}

// CAPool is the pool of the CA certificates of a bundle read from file,
// for TLCP; see ParseCABundle.
func CAPool(file string, data []byte) (*smx509.CertPool, error) {
	certs, err := ParseCABundle(file, data)
	if err != nil {
		return nil, err
	}
	pool := smx509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// TLSCAPool is the pool of the CA certificates of a bundle read from
// file, for crypto/tls; see ParseCABundle. SM2 certificates, which
// crypto/tls cannot use, are left out, so that one bundle may serve
// both; a bundle of SM2 certificates alone is an error.
func TLSCAPool(file string, data []byte) (*x509.CertPool, error) {
	certs, err := ParseCABundle(file, data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for _, c := range certs {
		if sm2.IsSM2PublicKey(c.PublicKey) {
			continue
		}
		xc, err := x509.ParseCertificate(c.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %q cannot be used by TLS: %v", file, c.Subject.String(), err)
		}
		pool.AddCert(xc)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds SM2 CA certificates only, which TLS cannot use; give the CAs of the RSA or ECDSA certificates", file)
	}
	return pool, nil
}

// ReadRoots reads trusted CA certificates from PEM files.
func ReadRoots(files ...string) ([]*smx509.Certificate, error) {
	var roots []*smx509.Certificate
	for _, f := range files {
		certs, err := readCertificates(f)
		if err != nil {
			return nil, fmt.Errorf("CA file %w", err)
		}
		roots = append(roots, certs...)
	}
	return roots, nil
}

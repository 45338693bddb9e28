package pki

import (
	"errors"
	"fmt"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/chain"
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
	t := certinfo.Now(opts.Now)
	var out []string
	check := func(field, path string) (*smx509.Certificate, error) {
		certs, err := chain.Load(field, path, opts.Roots, opts.Now)
		if err != nil {
			return nil, err
		}
		leaf := certs[0]
		pool, inter := smx509.NewCertPool(), smx509.NewCertPool()
		for _, r := range opts.Roots {
			pool.AddCert(r)
		}
		for _, c := range certs[1:] {
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
				return nil, fmt.Errorf("%s does not name host %q (it names %s); reissue it with that name (gmgate cert issue --dns/--ip)", path, opts.Host, certinfo.SANString(leaf))
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
	if certinfo.LooksLikeEnc(sign) || certinfo.LooksLikeSign(enc) {
		return nil, fmt.Errorf("%s (key usage %s) and %s (key usage %s) look swapped: give the signing certificate first and the encryption certificate with --enc", certFile, certinfo.KeyUsageString(sign.KeyUsage), opts.EncCert, certinfo.KeyUsageString(enc.KeyUsage))
	}
	out = append(out, "pair OK: same subject, signing and encryption usages in place")
	return out, nil
}

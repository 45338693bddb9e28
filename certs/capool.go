package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// ReadCAFile reads a file of CA certificates that field names (a
// configuration field such as "ca", or a flag such as "--ca"): a file
// that does not exist or cannot be read is an error that names the field
// and the fix, not the bare error of open.
func ReadCAFile(field, file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, certinfo.MissingFile(field, file, "the PEM file of the CA certificates")
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%s %s: %w", field, file, certinfo.ExplainPermission(fs.ErrPermission))
	}
	return nil, fmt.Errorf("%s %s: %w", field, file, err)
}

// ParseCABundle parses a file of CA certificates (PEM, or one DER
// certificate) that was read from file, as ReadRoots does: a damaged PEM
// block, a certificate that does not parse, or a file without any
// certificate is an error that names the file (and the block and its
// line) and the fix, never a CA left out without a word.
func ParseCABundle(file string, data []byte) ([]*smx509.Certificate, error) {
	certs, err := pemfile.ParseCertificates(data)
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

// ReadRoots reads trusted CA certificates from PEM files, given by the
// --ca flag of a command.
func ReadRoots(files ...string) ([]*smx509.Certificate, error) {
	var roots []*smx509.Certificate
	for _, f := range files {
		data, err := ReadCAFile("--ca", f)
		if err != nil {
			return nil, err
		}
		certs, err := ParseCABundle(f, data)
		if err != nil {
			return nil, fmt.Errorf("CA file %w", err)
		}
		roots = append(roots, certs...)
	}
	return roots, nil
}

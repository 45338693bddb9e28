package pki

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	// From is an RSA or ECDSA certificate file, or a directory of them.
	From string
	// Key, optional with a single From file, is the key of the existing
	// certificate; it is checked against it so that the old pair can keep
	// serving TLS clients. In a directory, NAME.key beside NAME.crt (or
	// .pem) is checked when present.
	Key string
	// CA issues the SM2 pairs; when nil, Migrate writes dual CSRs for an
	// external GM CA instead.
	CA *CA
	// OutDir receives the new files.
	OutDir string
	// KeyEncryption says how the new keys are written (nil: not
	// encrypted).
	KeyEncryption *KeyEncryption
	// Force replaces files that exist in OutDir; without it Migrate
	// refuses, before it writes anything, to replace any.
	Force bool
	Now   func() time.Time
}

// MigratedCert is one migrated certificate.
type MigratedCert struct {
	Source   string
	Old      *smx509.Certificate
	OldKey   string // the key checked against Old, if any
	Name     string
	Validity time.Duration
	Dual     *Dual     // when issued by the CA
	CSR      *DualCSR  // when written as requests
	Files    DualFiles // when issued
	CSRFiles CSRFiles  // when requested
	// SelfSignedCA reports that Old is a self-signed certificate marked
	// CA:TRUE without the keyCertSign usage, as `openssl req -x509`
	// makes a server certificate: migrated as the server certificate it
	// serves as.
	SelfSignedCA bool
	// CommonNameAdded is the common name, added as the DNS name of a
	// certificate that had no subjectAltNames (clients match those only).
	CommonNameAdded string
}

// MigrateResult lists what Migrate did.
type MigrateResult struct {
	Migrated []*MigratedCert
	// Skipped maps files that were not migrated to the reason.
	Skipped map[string]string
}

var certExtensions = map[string]bool{".pem": true, ".crt": true, ".cer": true, ".cert": true}

// Migrate reads existing RSA or ECDSA certificates and produces, for each,
// an SM2 signing/encryption pair with the same subject (byte for byte),
// the same subjectAltNames and the same lifetime (capped at MaxValidity
// and the CA's own expiry): issued by opts.CA, or as CSRs.
func Migrate(opts MigrateOptions) (*MigrateResult, error) {
	if opts.OutDir == "" {
		return nil, errors.New("no output directory (--out)")
	}
	st, err := os.Stat(opts.From)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	res := &MigrateResult{Skipped: map[string]string{}}
	type job struct{ cert, key string }
	var jobs []job
	if st.IsDir() {
		if opts.Key != "" {
			return nil, fmt.Errorf("--key goes with a single --from file; in a directory, NAME.key beside NAME.crt is checked")
		}
		entries, err := os.ReadDir(opts.From)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if e.IsDir() || !certExtensions[ext] {
				continue
			}
			p := filepath.Join(opts.From, e.Name())
			key := strings.TrimSuffix(p, filepath.Ext(p)) + ".key"
			if _, err := os.Stat(key); err != nil {
				key = ""
			}
			jobs = append(jobs, job{p, key})
		}
		if len(jobs) == 0 {
			return nil, fmt.Errorf("--from %s: no certificate files (.pem, .crt, .cer) in the directory", opts.From)
		}
	} else {
		jobs = append(jobs, job{opts.From, opts.Key})
	}
	names := map[string]bool{}
	for _, j := range jobs {
		m, skip, err := migrateOne(j.cert, j.key, opts)
		if err != nil {
			if st.IsDir() && skip {
				res.Skipped[j.cert] = err.Error()
				continue
			}
			return res, err
		}
		for base, n := m.Name, 2; names[m.Name]; n++ {
			m.Name = fmt.Sprintf("%s-%d", base, n)
		}
		names[m.Name] = true
		res.Migrated = append(res.Migrated, m)
	}
	if len(res.Migrated) == 0 {
		return res, fmt.Errorf("--from %s: nothing to migrate (%d files skipped)", opts.From, len(res.Skipped))
	}
	if !opts.Force {
		// The keys of an earlier run may be in service, or wait for the
		// certificates a GM CA issues for their requests.
		for _, m := range res.Migrated {
			f, r := DualFileNames(opts.OutDir, m.Name), csrFileNames(opts.OutDir, m.Name)
			paths := []string{f.SignCert, f.SignKey, f.EncCert, f.EncKey}
			if m.Dual == nil {
				paths = []string{r.SignCSR, r.SignKey, r.EncCSR, r.EncKey}
			}
			for _, p := range paths {
				if fileExists(p) {
					return nil, fmt.Errorf("%s already exists; choose another --out, or pass --force to overwrite it", p)
				}
			}
		}
	}
	for _, m := range res.Migrated {
		if m.Dual != nil {
			if m.Files, err = m.Dual.Write(opts.OutDir, m.Name, opts.KeyEncryption); err != nil {
				return res, err
			}
		} else if m.CSRFiles, err = m.CSR.Write(opts.OutDir, m.Name, opts.KeyEncryption); err != nil {
			return res, err
		}
	}
	return res, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// migrateOne prepares one migration; skip reports errors that only mean
// "not a certificate to migrate" (so a directory scan moves on).
func migrateOne(certFile, keyFile string, opts MigrateOptions) (*MigratedCert, bool, error) {
	certs, err := pemfile.ReadCertificates(certFile)
	if err != nil {
		return nil, true, fmt.Errorf("--from %w", err)
	}
	old := certs[0]
	selfSignedServer := old.IsCA && string(old.RawIssuer) == string(old.RawSubject) && old.KeyUsage&smx509.KeyUsageCertSign == 0
	if old.IsCA && !selfSignedServer {
		return nil, true, fmt.Errorf("--from %s is a CA certificate (%q, key usage %s), not a server certificate: give the server certificates it issued (a file, or a directory of them); for an SM2 CA of your own, run gmgate cert init-ca", certFile, old.Subject.String(), certinfo.KeyUsageString(old.KeyUsage))
	}
	if sm2.IsSM2PublicKey(old.PublicKey) {
		return nil, true, fmt.Errorf("--from %s is already an SM2 certificate", certFile)
	}
	m := &MigratedCert{Source: certFile, Old: old, SelfSignedCA: selfSignedServer}
	if keyFile != "" {
		k, err := accel.Open(context.Background(), keyFile)
		if err != nil {
			return nil, false, fmt.Errorf("--key: %w", certinfo.ExplainKeyError(err))
		}
		match := certinfo.PublicKeysEqual(k.Public(), old.PublicKey)
		k.Close()
		if !match {
			return nil, false, fmt.Errorf("--key %s does not belong to %s (the public keys differ); give the key of the existing certificate, or leave --key out", keyFile, certFile)
		}
		m.OldKey = keyFile
	}
	m.Validity = old.NotAfter.Sub(old.NotBefore)
	if m.Validity > MaxValidity {
		m.Validity = MaxValidity
	}
	if m.Validity < 24*time.Hour {
		m.Validity = 24 * time.Hour
	}
	issue := IssueOptions{
		RawSubject:     old.RawSubject,
		DNSNames:       old.DNSNames,
		IPAddresses:    old.IPAddresses,
		EmailAddresses: old.EmailAddresses,
		URIs:           old.URIs,
		Validity:       m.Validity,
		Now:            opts.Now,
	}
	if len(old.Subject.Names) == 0 && len(old.DNSNames)+len(old.IPAddresses) > 0 {
		issue.RawSubject = nil
	}
	if cn := old.Subject.CommonName; len(old.DNSNames)+len(old.IPAddresses)+len(old.EmailAddresses)+len(old.URIs) == 0 && strings.Contains(cn, ".") && dnsNameProblem(cn) == "" && net.ParseIP(cn) == nil {
		issue.DNSNames = []string{cn}
		m.CommonNameAdded = cn
	}
	m.Name = fileNameFor(old)
	if opts.CA != nil {
		m.Dual, err = opts.CA.IssueDual(issue)
	} else {
		m.CSR, err = NewDualCSR(issue)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", certFile, err)
	}
	return m, false, nil
}

// fileNameFor derives a file name from a certificate's first DNS name
// (wildcards become "wildcard"), IP or common name.
func fileNameFor(c *smx509.Certificate) string {
	name := c.Subject.CommonName
	if len(c.DNSNames) > 0 {
		name = c.DNSNames[0]
	} else if len(c.IPAddresses) > 0 {
		name = c.IPAddresses[0].String()
	}
	name = strings.ReplaceAll(name, "*", "wildcard")
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
	clean = strings.Trim(clean, "._")
	if clean == "" {
		clean = "server"
	}
	return clean
}

// WriteReport writes a short old-versus-new comparison.
func (r *MigrateResult) WriteReport(w io.Writer) error {
	var b strings.Builder
	for _, m := range r.Migrated {
		fmt.Fprintf(&b, "%s\n", m.Source)
		row := func(what, old, new string) { fmt.Fprintf(&b, "  %-10s %-42s -> %s\n", what, old, new) }
		row("subject", m.Old.Subject.String(), "same (byte for byte)")
		if m.CommonNameAdded != "" {
			row("names", certinfo.SANString(m.Old), "DNS:"+m.CommonNameAdded+" (the common name: clients match subjectAltNames only)")
		} else {
			row("names", certinfo.SANString(m.Old), "same")
		}
		row("key", certinfo.DescribePublicKey(m.Old.PublicKey), "SM2 (sign) + SM2 (enc)")
		row("lifetime", fmt.Sprintf("%d days", int(m.Old.NotAfter.Sub(m.Old.NotBefore).Hours()/24)), fmt.Sprintf("%d days", int(m.Validity.Hours()/24)))
		if m.Dual != nil {
			row("issuer", m.Old.Issuer.String(), m.Dual.SignCert.Issuer.String())
			row("usage", certinfo.KeyUsageString(m.Old.KeyUsage), "sign: "+certinfo.KeyUsageString(m.Dual.SignCert.KeyUsage)+"; enc: "+certinfo.KeyUsageString(m.Dual.EncCert.KeyUsage))
			fmt.Fprintf(&b, "  wrote      %s, %s, %s, %s\n", m.Files.SignCert, m.Files.SignKey, m.Files.EncCert, m.Files.EncKey)
		} else {
			fmt.Fprintf(&b, "  wrote      %s, %s (send both to your GM CA), keys %s, %s\n", m.CSRFiles.SignCSR, m.CSRFiles.EncCSR, m.CSRFiles.SignKey, m.CSRFiles.EncKey)
		}
		if m.SelfSignedCA {
			fmt.Fprintf(&b, "  note:      the old certificate is self-signed and marked CA:TRUE without keyCertSign, as openssl req -x509 makes a server certificate; it was migrated as the server certificate it serves as, and the new pair is a server certificate from the CA\n")
		}
		if m.OldKey != "" {
			fmt.Fprintf(&b, "  tls side:  keep serving %s with %s to TLS clients; the SM2 pair serves TLCP clients on the same auto port\n", m.Source, m.OldKey)
		}
	}
	skipped := make([]string, 0, len(r.Skipped))
	for f := range r.Skipped {
		skipped = append(skipped, f)
	}
	sort.Strings(skipped)
	for _, f := range skipped {
		fmt.Fprintf(&b, "skipped %s: %s\n", f, r.Skipped[f])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

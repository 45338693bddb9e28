package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/spf13/cobra"
)

func init() {
	certCmd.AddCommand(newSignCmd())
}

func newSignCmd() *cobra.Command {
	var (
		caDir, caPwFile, out, usage string
		csrFiles                    []string
		days                        int
		force                       bool
	)
	cmd := &cobra.Command{
		Use:   "sign --ca DIR --csr FILE [--csr FILE] [--out DIR]",
		Short: "Issue certificates for requests made elsewhere (dual CSRs, card-held keys)",
		Long: `Sign certificate requests with a local CA: the key stays where the request
was made (the keys of gmgate cert csr, or a crypto card whose vendor tool
made the request). Subject and names come from the request.

An SM2 request becomes a TLCP signing or encryption certificate by the key
usage it asks for (gmgate cert csr asks for the right one); a request that
asks for none needs --usage sign or --usage enc. Such certificates get the
shape gmgate cert issue gives a pair: EKU serverAuth+clientAuth, no
BasicConstraints, random 128-bit serial. An RSA or ECDSA request, signed by
an ECDSA or RSA CA, becomes a certificate for the tls side.

Each FILE.csr becomes FILE.crt in --out (default: beside the request),
followed by the CA's intermediate if it has one; ca.crt is written there
too.`,
		Example: `  gmgate cert sign --ca ca --csr req/api.example.cn.sign.csr --csr req/api.example.cn.enc.csr
  gmgate cert sign --ca ca --csr card-sign.csr --usage sign --out site
  gmgate cert sign --ca tls-ca --csr legacy.csr --days 90 --out site`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(csrFiles) == 0 {
				return errors.New("--csr is required: the certificate request file (repeat it for a pair)")
			}
			valid, err := validity("--days", days)
			if err != nil {
				return err
			}
			if usage != "" && usage != pki.RoleSign && usage != pki.RoleEnc {
				return fmt.Errorf("--usage %q: give sign or enc", usage)
			}
			if usage != "" && len(csrFiles) > 1 {
				return errors.New("--usage applies to one request; sign the requests one at a time")
			}
			ca, err := loadCA(caDir, caPwFile)
			if err != nil {
				return err
			}
			type job struct {
				csrFile, certFile string
				csr               *smx509.CertificateRequest
			}
			var jobs []job
			for _, f := range csrFiles {
				csr, err := pki.ReadCSR(f)
				if err != nil {
					return fmt.Errorf("--csr %w", err)
				}
				dir := out
				if dir == "" {
					dir = filepath.Dir(f)
				}
				jobs = append(jobs, job{f, filepath.Join(dir, strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))+".crt"), csr})
			}
			for _, j := range jobs {
				if err := refuseOverwrite(force, j.certFile); err != nil {
					return err
				}
				if err := refuseOtherCA(force, filepath.Join(filepath.Dir(j.certFile), pki.CACertFile), ca, overwriteFix); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			byRole := map[string][]*smx509.Certificate{}
			files := map[string]string{}
			for _, j := range jobs {
				c, role, err := ca.SignCSR(j.csr, pki.SignOptions{Role: usage, Validity: valid})
				if err != nil {
					return fmt.Errorf("--csr %s: %w", j.csrFile, err)
				}
				if len(byRole[role]) > 0 && role != pki.RoleTLS {
					return fmt.Errorf("--csr %s: a second request for the %s certificate; give one signing and one encryption request", j.csrFile, role)
				}
				byRole[role] = append(byRole[role], c)
				files[role] = j.certFile
				if err := pki.WriteCertificates(j.certFile, append([]*smx509.Certificate{c}, ca.Chain()...)...); err != nil {
					return err
				}
				caFile := filepath.Join(filepath.Dir(j.certFile), pki.CACertFile)
				if err := pki.WriteCertificates(caFile, ca.Root); err != nil {
					return err
				}
				fmt.Fprintf(w, "issued %q (%s, %s key) for %s, valid until %s\n  wrote %s and %s\n", c.Subject.String(), roleName(role), pki.DescribePublicKey(c.PublicKey), names(c), c.NotAfter.UTC().Format(time.RFC3339), j.certFile, caFile)
			}
			if s, e := byRole[pki.RoleSign], byRole[pki.RoleEnc]; len(s) == 1 && len(e) == 1 {
				if string(s[0].RawSubject) != string(e[0].RawSubject) || names(s[0]) != names(e[0]) {
					fmt.Fprintf(w, "WARNING: the two requests name different subjects or hosts; GmSSL peers reject such a pair\n")
				}
				fmt.Fprintf(w, "tlcp:\n  sign_cert: %s\n  sign_key:  (the key the signing request was made with)\n  enc_cert:  %s\n  enc_key:   (the key the encryption request was made with)\n", files[pki.RoleSign], files[pki.RoleEnc])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory (from gmgate cert init-ca)")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.StringSliceVar(&csrFiles, "csr", nil, "certificate request (PEM or DER); repeat for a signing and an encryption request")
	f.StringVar(&out, "out", "", "directory for the certificates (default: beside each request)")
	f.StringVar(&usage, "usage", "", "for an SM2 request that asks for no key usage: sign or enc")
	f.IntVar(&days, "days", 365, "validity in days (1 to 3653)")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func roleName(role string) string {
	switch role {
	case pki.RoleSign:
		return "TLCP signing certificate"
	case pki.RoleEnc:
		return "TLCP encryption certificate"
	}
	return "TLS certificate"
}

// names lists a certificate's DNS names and IP addresses.
func names(c *smx509.Certificate) string {
	out := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	if len(out) == 0 {
		return "(no names)"
	}
	return strings.Join(out, ", ")
}

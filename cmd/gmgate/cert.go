package main

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/spf13/cobra"
)

var certCmd = &cobra.Command{
	Use:   "cert",
	Short: "Make, inspect, verify, migrate and revoke SM2 certificates",
	Long: `Certificates for gmgate: a local SM2 CA, dual (signing + encryption)
certificates shaped for every deployed TLCP peer, CSRs for an external GM CA,
inspection, verification, and migration of RSA/ECDSA certificates to SM2.

  gmgate cert init-ca --out ca
  gmgate cert issue --ca ca --dns api.example.cn --ip 10.0.0.5 --out site
  gmgate cert csr --dns api.example.cn --out req && gmgate cert sign --ca ca --csr req/api.example.cn.sign.csr --csr req/api.example.cn.enc.csr
  gmgate cert inspect site/api.example.cn.sign.crt site/api.example.cn.sign.key
  gmgate cert verify --ca ca/ca.crt --host api.example.cn --enc site/api.example.cn.enc.crt site/api.example.cn.sign.crt
  gmgate cert migrate --from /etc/nginx/site.crt --key /etc/nginx/site.key --ca ca --out site
  gmgate cert revoke --ca ca client/alice.sign.crt client/alice.enc.crt && gmgate cert crl --ca ca`,
}

func init() {
	rootCmd.AddCommand(certCmd)
	certCmd.AddCommand(newInitCACmd(), newIssueCmd(), newCSRCmd())
}

// keyFlags are the flags that say how new private keys are written.
type keyFlags struct {
	passwordFile, format string
}

func (k *keyFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.passwordFile, "key-password-file", "", "encrypt the new keys (PKCS#8, PBES2/PBKDF2-hmacWithSM3/SM4-CBC) with the password in this file")
	f.StringVar(&k.format, "key-format", string(pki.DefaultKeyFormat), "layout of encrypted keys: gmssl (read by GmSSL, gmsm) or tongsuo (read by Tongsuo); gmgate reads both")
}

// encryption returns how to write keys: nil without a password.
func (k *keyFlags) encryption(cmd *cobra.Command) (*pki.KeyEncryption, error) {
	format, err := pki.ParseKeyFormat(k.format)
	if err != nil {
		return nil, fmt.Errorf("--key-format: %w", err)
	}
	pw, err := readPassword(k.passwordFile)
	if err != nil || pw == nil {
		if err == nil && cmd.Flags().Changed("key-format") {
			return nil, errors.New("--key-format says how encrypted keys are written; give --key-password-file too")
		}
		return nil, err
	}
	return &pki.KeyEncryption{Password: pw, Format: format}, nil
}

// validity checks a --days value.
func validity(flag string, days int) (time.Duration, error) {
	maxDays := int(pki.MaxValidity.Hours() / 24)
	if days <= 0 || days > maxDays {
		return 0, fmt.Errorf("%s %d: give a number of days from 1 to %d", flag, days, maxDays)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

// subjectFlags are the identity flags shared by issue and csr.
type subjectFlags struct {
	dns, ips, orgs []string
	cn, country    string
	days           int
}

func (s *subjectFlags) register(cmd *cobra.Command, defaultDays int) {
	f := cmd.Flags()
	f.StringSliceVar(&s.dns, "dns", nil, "DNS name for the subjectAltName (repeat or comma-separate)")
	f.StringSliceVar(&s.ips, "ip", nil, "IP address for the subjectAltName (repeat or comma-separate)")
	f.StringVar(&s.cn, "cn", "", "subject common name (default: the first --dns or --ip)")
	f.StringSliceVar(&s.orgs, "org", nil, "subject organization")
	f.StringVar(&s.country, "country", "", "subject country (two letters, e.g. CN)")
	if defaultDays > 0 {
		f.IntVar(&s.days, "days", defaultDays, "validity in days (at most 3653)")
	}
}

func (s *subjectFlags) options(cmd *cobra.Command) (pki.IssueOptions, error) {
	o := pki.IssueOptions{
		Subject:  pkix.Name{CommonName: s.cn, Organization: s.orgs},
		DNSNames: s.dns,
	}
	if cmd.Flags().Lookup("days") != nil {
		var err error
		if o.Validity, err = validity("--days", s.days); err != nil {
			return o, err
		}
	}
	if s.country != "" {
		o.Subject.Country = []string{s.country}
	}
	for _, v := range s.ips {
		ip := net.ParseIP(strings.TrimSpace(v))
		if ip == nil {
			return o, fmt.Errorf("--ip %q is not an IP address", v)
		}
		o.IPAddresses = append(o.IPAddresses, ip)
	}
	return o, nil
}

// name is the file name stem for the issued files.
func (s *subjectFlags) name(explicit string) string {
	switch {
	case explicit != "":
		return explicit
	case len(s.dns) > 0:
		return strings.ReplaceAll(s.dns[0], "*", "wildcard")
	case len(s.ips) > 0:
		return s.ips[0]
	case s.cn != "":
		return s.cn
	}
	return "server"
}

// readPassword reads a key password from a file (first line); never
// echoed or logged.
func readPassword(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key-password-file: %w", err)
	}
	pw := []byte(strings.TrimRight(string(b), "\r\n"))
	if len(pw) == 0 {
		return nil, fmt.Errorf("--key-password-file %s is empty", path)
	}
	return pw, nil
}

// refuseOtherCA fails when path (the ca.crt written beside issued files)
// holds a certificate other than the root of the CA that issues them,
// unless force: it is another CA's, perhaps a CA directory's own, and
// replacing it would lose that CA. fix says what to do instead.
func refuseOtherCA(force bool, path string, ca *pki.CA, fix string) error {
	if force {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	held, err := certs.ReadRoots(path)
	if err == nil && len(held) > 0 && string(held[0].Raw) == string(ca.Root.Raw) {
		return nil
	}
	what := "something other than a certificate"
	if err == nil && len(held) > 0 {
		what = fmt.Sprintf("the certificate of another CA (%q)", held[0].Subject.String())
	}
	return fmt.Errorf("%s holds %s, not of the CA issuing now (%q); %s", path, what, ca.Root.Subject.String(), fix)
}

// overwriteFix is what refuseOtherCA tells commands that take --force.
const overwriteFix = "choose another --out, or pass --force to overwrite it"

// refuseOverwrite fails when any of paths exists, unless force.
func refuseOverwrite(force bool, paths ...string) error {
	if force {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s already exists; choose another --out or --name, or pass --force to overwrite it", p)
		}
	}
	return nil
}

func newInitCACmd() *cobra.Command {
	var (
		out, cn, org, keyType string
		days                  int
		intermediate, force   bool
		keys                  keyFlags
	)
	cmd := &cobra.Command{
		Use:   "init-ca --out DIR",
		Short: "Create a local root CA (and optionally an intermediate): SM2 for TLCP, ECDSA or RSA for TLS",
		Long: `Create a local root CA in DIR (ca.crt, ca.key), and with --intermediate an
intermediate CA that issues the certificates (intermediate.crt,
intermediate.key) so that ca.key can be kept offline. An SM2 CA (the default)
issues TLCP pairs; an ECDSA or RSA CA (--key-type) issues certificates for
the tls side of a listener.`,
		Example: `  gmgate cert init-ca --out ca
  gmgate cert init-ca --out ca --intermediate --cn "Example GM Root" --key-password-file pw.txt
  gmgate cert init-ca --out tls-ca --key-type ecdsa-p256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for ca.crt and ca.key")
			}
			alg, err := pki.ParseKeyAlgorithm(keyType)
			if err != nil {
				return fmt.Errorf("--key-type: %w", err)
			}
			valid, err := validity("--days", days)
			if err != nil {
				return err
			}
			enc, err := keys.encryption(cmd)
			if err != nil {
				return err
			}
			opts := pki.CAOptions{Intermediate: intermediate, KeyAlgorithm: alg, Validity: valid}
			opts.Subject.CommonName = cn
			if org != "" {
				opts.Subject.Organization = []string{org}
			}
			paths := []string{filepath.Join(out, pki.CACertFile), filepath.Join(out, pki.CAKeyFile)}
			if intermediate {
				paths = append(paths, filepath.Join(out, pki.IntermediateCertFile), filepath.Join(out, pki.IntermediateKeyFile))
			}
			if err := refuseOverwrite(force, paths...); err != nil {
				return err
			}
			ca, err := pki.NewCA(opts)
			if err != nil {
				return err
			}
			if err := ca.Write(out, enc); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "root CA %q (%s), valid until %s\n", ca.Root.Subject.String(), alg, ca.Root.NotAfter.UTC().Format(time.RFC3339))
			if ca.Intermediate != nil {
				fmt.Fprintf(w, "intermediate CA %q issues the certificates; keep %s offline\n", ca.Intermediate.Subject.String(), filepath.Join(out, pki.CAKeyFile))
			}
			fmt.Fprintf(w, "wrote %s\n", strings.Join(paths, ", "))
			if alg.IsSM2() {
				fmt.Fprintf(w, "next: gmgate cert issue --ca %s --dns NAME --out DIR      (a TLCP signing + encryption pair)\n", out)
			} else {
				fmt.Fprintf(w, "next: gmgate cert issue --ca %s --dns NAME --out DIR      (a certificate for the tls side)\n", out)
			}
			fmt.Fprintf(w, "  or: gmgate cert sign --ca %s --csr FILE.csr               (sign a request made elsewhere)\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the CA into")
	f.StringVar(&cn, "cn", "", "root CA common name (default \"gmgate local SM2 root CA\", or ECDSA/RSA)")
	f.StringVar(&org, "org", "", "CA organization")
	f.IntVar(&days, "days", 3650, "CA validity in days (1 to 3653)")
	f.BoolVar(&intermediate, "intermediate", false, "also create an intermediate CA that issues the certificates")
	f.StringVar(&keyType, "key-type", "sm2", "CA key type: sm2 (TLCP), or ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096 (TLS)")
	keys.register(cmd)
	f.Lookup("key-password-file").Usage = "encrypt the CA keys with the password in this file"
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func loadCA(dir, pwFile string) (*pki.CA, error) {
	if dir == "" {
		return nil, errors.New("--ca is required: the directory made by gmgate cert init-ca")
	}
	return pki.LoadCAWithOptions(dir, pki.LoadCAOptions{KeyPasswordFile: pwFile, PasswordFlag: "--ca-key-password-file"})
}

func newIssueCmd() *cobra.Command {
	var (
		subj                           subjectFlags
		caDir, caPwFile, out, name, kt string
		force                          bool
		keys                           keyFlags
	)
	cmd := &cobra.Command{
		Use:   "issue --ca DIR --dns NAME [--ip ADDR] --out DIR",
		Short: "Issue a certificate from a local CA: an SM2 signing + encryption pair, or a TLS certificate",
		Long: `Issue certificates from a CA made by gmgate cert init-ca, with new keys.

From an SM2 CA: a TLCP pair, a signing certificate (digitalSignature,
nonRepudiation) and an encryption certificate (keyEncipherment,
dataEncipherment, keyAgreement), with identical subject, names and issuer,
EKU serverAuth+clientAuth, random 128-bit serials and no BasicConstraints, as
the strictest TLCP peers require. Writes NAME.sign.crt, NAME.sign.key,
NAME.enc.crt, NAME.enc.key (keys 0600; each certificate followed by the
intermediate, if any) and ca.crt.

From an ECDSA or RSA CA: a certificate for the tls side of a listener
(ECDSA P-256 or RSA-2048 like the CA, or --key-type), written as NAME.crt
and NAME.key, with ca.crt.`,
		Example: `  gmgate cert issue --ca ca --dns api.example.cn --dns www.example.cn --ip 10.0.0.5 --out site
  gmgate cert issue --ca ca --dns api.example.cn --days 730 --key-password-file pw.txt --key-format tongsuo --out site
  gmgate cert issue --ca tls-ca --dns api.example.cn --out tls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for the certificate files")
			}
			opts, err := subj.options(cmd)
			if err != nil {
				return err
			}
			if kt != "" {
				if opts.KeyAlgorithm, err = pki.ParseKeyAlgorithm(kt); err != nil {
					return fmt.Errorf("--key-type: %w", err)
				}
			}
			enc, err := keys.encryption(cmd)
			if err != nil {
				return err
			}
			ca, err := loadCA(caDir, caPwFile)
			if err != nil {
				return err
			}
			stem := subj.name(name)
			w := cmd.OutOrStdout()
			names := strings.Join(append(append([]string{}, subj.dns...), subj.ips...), ", ")
			if !ca.KeyAlgorithm().IsSM2() {
				return issueTLS(w, ca, opts, out, stem, names, enc, force)
			}
			if kt != "" && !opts.KeyAlgorithm.IsSM2() {
				return fmt.Errorf("--key-type %s: an SM2 CA issues SM2 pairs; for a TLS certificate use an ECDSA or RSA CA (gmgate cert init-ca --key-type %s)", kt, kt)
			}
			f := pki.DualFileNames(out, stem)
			if err := refuseOverwrite(force, f.SignCert, f.SignKey, f.EncCert, f.EncKey); err != nil {
				return err
			}
			if err := refuseOtherCA(force, f.CACert, ca, overwriteFix); err != nil {
				return err
			}
			pair, err := ca.IssueDual(opts)
			if err != nil {
				return err
			}
			if f, err = pair.Write(out, stem, enc); err != nil {
				return err
			}
			fmt.Fprintf(w, "issued %q for %s, valid until %s\n", pair.SignCert.Subject.String(), names, pair.SignCert.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "  sign_cert: %s\n  sign_key:  %s\n  enc_cert:  %s\n  enc_key:   %s\n  CA:        %s\n", f.SignCert, f.SignKey, f.EncCert, f.EncKey, f.CACert)
			return nil
		},
	}
	subj.register(cmd, 365)
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory (from gmgate cert init-ca)")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.StringVar(&out, "out", "", "directory to write the files into")
	f.StringVar(&name, "name", "", "file name stem (default: the first --dns or --ip)")
	f.StringVar(&kt, "key-type", "", "key type of a TLS certificate: ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096 (default: like the CA)")
	keys.register(cmd)
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

// issueTLS issues and writes a TLS certificate from an ECDSA or RSA CA.
func issueTLS(w io.Writer, ca *pki.CA, opts pki.IssueOptions, out, stem, names string, enc *pki.KeyEncryption, force bool) error {
	certFile, keyFile, caFile := filepath.Join(out, stem+".crt"), filepath.Join(out, stem+".key"), filepath.Join(out, pki.CACertFile)
	if err := refuseOverwrite(force, certFile, keyFile); err != nil {
		return err
	}
	if err := refuseOtherCA(force, caFile, ca, overwriteFix); err != nil {
		return err
	}
	leaf, err := ca.IssueTLS(opts)
	if err != nil {
		return err
	}
	if _, _, err := leaf.Write(out, stem, enc); err != nil {
		return err
	}
	if err := pki.WriteCertificates(caFile, ca.Root); err != nil {
		return err
	}
	fmt.Fprintf(w, "issued %q (%s key, for the tls side) for %s, valid until %s\n", leaf.Cert.Subject.String(), pki.DescribePublicKey(leaf.Cert.PublicKey), names, leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  tls:\n    cert: %s\n    key:  %s\n  CA:     %s\n", certFile, keyFile, caFile)
	return nil
}

func newCSRCmd() *cobra.Command {
	var (
		subj      subjectFlags
		out, name string
		force     bool
		keys      keyFlags
	)
	cmd := &cobra.Command{
		Use:   "csr --dns NAME [--ip ADDR] --out DIR",
		Short: "Make SM2 keys and dual CSRs (signing + encryption) for an external GM CA",
		Long: `Make two SM2 keys and a certificate request for each: NAME.sign.csr asks for
digitalSignature+nonRepudiation, NAME.enc.csr for keyEncipherment,
dataEncipherment and keyAgreement; both carry the same subject and names and
ask for serverAuth+clientAuth. Send both to the GM CA (or sign them with a
local one: gmgate cert sign); keep the .key files.`,
		Example: `  gmgate cert csr --dns api.example.cn --org "Example Ltd" --country CN --out req`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for the requests and keys")
			}
			opts, err := subj.options(cmd)
			if err != nil {
				return err
			}
			enc, err := keys.encryption(cmd)
			if err != nil {
				return err
			}
			stem := subj.name(name)
			if err := refuseOverwrite(force, filepath.Join(out, stem+".sign.key"), filepath.Join(out, stem+".enc.key")); err != nil {
				return err
			}
			c, err := pki.NewDualCSR(opts)
			if err != nil {
				return err
			}
			f, err := c.Write(out, stem, enc)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "requests for %q:\n  %s\n  %s\nkeys (keep them): %s, %s\n", c.SignCSR.Subject.String(), f.SignCSR, f.EncCSR, f.SignKey, f.EncKey)
			return nil
		},
	}
	subj.register(cmd, 0)
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the requests and keys into")
	f.StringVar(&name, "name", "", "file name stem (default: the first --dns or --ip)")
	keys.register(cmd)
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

package main

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/spf13/cobra"
)

var certCmd = &cobra.Command{
	Use:   "cert",
	Short: "Make, inspect, verify and migrate SM2 certificates",
	Long: `Certificates for gmgate: a local SM2 CA, dual (signing + encryption)
certificates shaped for every deployed TLCP peer, CSRs for an external GM CA,
inspection, verification, and migration of RSA/ECDSA certificates to SM2.

  gmgate cert init-ca --out ca
  gmgate cert issue --ca ca --dns api.example.cn --ip 10.0.0.5 --out site
  gmgate cert inspect site/api.example.cn.sign.crt site/api.example.cn.sign.key
  gmgate cert verify --ca ca/ca.crt --host api.example.cn --enc site/api.example.cn.enc.crt site/api.example.cn.sign.crt
  gmgate cert migrate --from /etc/nginx/site.crt --key /etc/nginx/site.key --ca ca --out site`,
}

func init() {
	rootCmd.AddCommand(certCmd)
	certCmd.AddCommand(newInitCACmd(), newIssueCmd(), newCSRCmd())
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

func (s *subjectFlags) options() (certs.IssueOptions, error) {
	o := certs.IssueOptions{
		Subject:  pkix.Name{CommonName: s.cn, Organization: s.orgs},
		DNSNames: s.dns,
		Validity: time.Duration(s.days) * 24 * time.Hour,
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
		out, cn, org, pwFile, keyType string
		days                          int
		intermediate, force           bool
	)
	cmd := &cobra.Command{
		Use:   "init-ca --out DIR",
		Short: "Create a local SM2 root CA (and optionally an intermediate)",
		Example: `  gmgate cert init-ca --out ca
  gmgate cert init-ca --out ca --intermediate --cn "Example GM Root" --key-password-file pw.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for ca.crt and ca.key")
			}
			pw, err := readPassword(pwFile)
			if err != nil {
				return err
			}
			opts := certs.CAOptions{Intermediate: intermediate, KeyAlgorithm: certs.KeyAlgorithm(keyType), Validity: time.Duration(days) * 24 * time.Hour}
			opts.Subject.CommonName = cn
			if org != "" {
				opts.Subject.Organization = []string{org}
			}
			paths := []string{out + "/" + certs.CACertFile, out + "/" + certs.CAKeyFile}
			if intermediate {
				paths = append(paths, out+"/"+certs.IntermediateCertFile, out+"/"+certs.IntermediateKeyFile)
			}
			if err := refuseOverwrite(force, paths...); err != nil {
				return err
			}
			ca, err := certs.NewCA(opts)
			if err != nil {
				return err
			}
			if err := ca.Write(out, pw); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "root CA %q, valid until %s\n", ca.Root.Subject.String(), ca.Root.NotAfter.UTC().Format(time.RFC3339))
			if ca.Intermediate != nil {
				fmt.Fprintf(w, "intermediate CA %q issues the certificates; keep %s/%s offline\n", ca.Intermediate.Subject.String(), out, certs.CAKeyFile)
			}
			fmt.Fprintf(w, "wrote %s\n", strings.Join(paths, ", "))
			fmt.Fprintf(w, "next: gmgate cert issue --ca %s --dns NAME --out DIR\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the CA into")
	f.StringVar(&cn, "cn", "", "root CA common name (default \"gmgate local SM2 root CA\")")
	f.StringVar(&org, "org", "", "CA organization")
	f.IntVar(&days, "days", 3650, "CA validity in days (at most 3653)")
	f.BoolVar(&intermediate, "intermediate", false, "also create an intermediate CA that issues the certificates")
	f.StringVar(&pwFile, "key-password-file", "", "encrypt the CA keys with the password in this file")
	f.StringVar(&keyType, "key-type", "sm2", "CA key type: sm2 (TLCP) or ecdsa-p256 (TLS)")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func loadCA(dir, pwFile string) (*certs.CA, error) {
	if dir == "" {
		return nil, errors.New("--ca is required: the directory made by gmgate cert init-ca")
	}
	return certs.LoadCAWithOptions(dir, certs.LoadCAOptions{KeyPasswordFile: pwFile})
}

func newIssueCmd() *cobra.Command {
	var (
		subj                               subjectFlags
		caDir, caPwFile, out, name, pwFile string
		force                              bool
	)
	cmd := &cobra.Command{
		Use:   "issue --ca DIR --dns NAME [--ip ADDR] --out DIR",
		Short: "Issue an SM2 signing + encryption certificate pair from a local CA",
		Long: `Issue a TLCP certificate pair: a signing certificate (digitalSignature,
nonRepudiation) and an encryption certificate (keyEncipherment,
dataEncipherment, keyAgreement), with identical subject, names and issuer,
EKU serverAuth+clientAuth, random 128-bit serials and no BasicConstraints, as
the strictest TLCP peers require. Writes NAME.sign.crt, NAME.sign.key,
NAME.enc.crt, NAME.enc.key (keys 0600; each certificate followed by the
intermediate, if any) and ca.crt.`,
		Example: `  gmgate cert issue --ca ca --dns api.example.cn --dns www.example.cn --ip 10.0.0.5 --out site
  gmgate cert issue --ca ca --dns api.example.cn --days 730 --key-password-file pw.txt --out site`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for the certificate files")
			}
			opts, err := subj.options()
			if err != nil {
				return err
			}
			pw, err := readPassword(pwFile)
			if err != nil {
				return err
			}
			ca, err := loadCA(caDir, caPwFile)
			if err != nil {
				return err
			}
			stem := subj.name(name)
			f := certs.DualFileNames(out, stem)
			if err := refuseOverwrite(force, f.SignCert, f.SignKey, f.EncCert, f.EncKey); err != nil {
				return err
			}
			pair, err := ca.IssueDual(opts)
			if err != nil {
				return err
			}
			if f, err = pair.Write(out, stem, pw); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "issued %q for %s, valid until %s\n", pair.SignCert.Subject.String(), strings.Join(append(append([]string{}, subj.dns...), subj.ips...), ", "), pair.SignCert.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "  sign_cert: %s\n  sign_key:  %s\n  enc_cert:  %s\n  enc_key:   %s\n  CA:        %s\n", f.SignCert, f.SignKey, f.EncCert, f.EncKey, f.CACert)
			return nil
		},
	}
	subj.register(cmd, 365)
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory (from gmgate cert init-ca)")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.StringVar(&out, "out", "", "directory to write the pair into")
	f.StringVar(&name, "name", "", "file name stem (default: the first --dns or --ip)")
	f.StringVar(&pwFile, "key-password-file", "", "encrypt the new keys (PBES2/PBKDF2-hmacWithSM3/SM4-CBC) with the password in this file")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func newCSRCmd() *cobra.Command {
	var (
		subj              subjectFlags
		out, name, pwFile string
		force             bool
	)
	cmd := &cobra.Command{
		Use:   "csr --dns NAME [--ip ADDR] --out DIR",
		Short: "Make SM2 keys and dual CSRs (signing + encryption) for an external GM CA",
		Long: `Make two SM2 keys and a certificate request for each: NAME.sign.csr asks for
digitalSignature+nonRepudiation, NAME.enc.csr for keyEncipherment,
dataEncipherment and keyAgreement; both carry the same subject and names and
ask for serverAuth+clientAuth. Send both to the GM CA; keep the .key files.`,
		Example: `  gmgate cert csr --dns api.example.cn --org "Example Ltd" --country CN --out req`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required: the directory for the requests and keys")
			}
			opts, err := subj.options()
			if err != nil {
				return err
			}
			pw, err := readPassword(pwFile)
			if err != nil {
				return err
			}
			stem := subj.name(name)
			if err := refuseOverwrite(force, out+"/"+stem+".sign.key", out+"/"+stem+".enc.key"); err != nil {
				return err
			}
			c, err := certs.NewDualCSR(opts)
			if err != nil {
				return err
			}
			f, err := c.Write(out, stem, pw)
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
	f.StringVar(&pwFile, "key-password-file", "", "encrypt the keys with the password in this file")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

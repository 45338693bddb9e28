package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/spf13/cobra"
)

func init() {
	certCmd.AddCommand(newInspectCmd(), newVerifyCmd())
}

// errFindings makes the command exit non-zero after printing its report.
var errFindings = errors.New("problems found (see ERROR lines above)")

func newInspectCmd() *cobra.Command {
	var (
		caFiles []string
		pwFile  string
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE...",
		Short: "Describe certificates, keys and requests, and flag problems",
		Long: `Show subject, names, validity, key type, usages, fingerprints and chain
of each certificate, key and request in the files, and flag expired or
not-yet-valid certificates, wrong usages, keys that match none of the
certificates given, missing intermediates and bad signatures. A certificate
that OpenSSL 3.0 signed without "-sigopt distid:1234567812345678" (its SM2
signature verifies only with an empty user ID) is recognised and the fix
explained. Exits 1 when an ERROR is reported.`,
		Example: `  gmgate cert inspect site/api.example.cn.sign.crt site/api.example.cn.sign.key
  gmgate cert inspect --ca ca/ca.crt site/*.crt site/*.key
  gmgate cert inspect --key-password-file pw.txt site/api.example.cn.enc.key`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := pki.InspectOptions{}
			var err error
			if len(caFiles) > 0 {
				if opts.Roots, err = certs.ReadRoots(caFiles...); err != nil {
					return err
				}
			}
			if opts.KeyPassword, err = readPassword(pwFile); err != nil {
				return err
			}
			r := pki.Inspect(args, opts)
			if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if r.HasErrors() {
				return errFindings
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&caFiles, "ca", nil, "trusted CA certificate file(s), to check chains and signatures")
	cmd.Flags().StringVar(&pwFile, "key-password-file", "", "password of encrypted keys")
	return cmd
}

func newVerifyCmd() *cobra.Command {
	var (
		caFiles     []string
		host, encCt string
	)
	cmd := &cobra.Command{
		Use:   "verify --ca CA.crt [--host NAME] [--enc ENC.crt] CERT",
		Short: "Verify a certificate's chain and host name (and a TLCP pair)",
		Long: `Verify CERT (leaf first, then its intermediates) against the trusted CA
certificates, check that it names --host, and with --enc verify the
encryption certificate too and check that the pair belongs together.`,
		Example: `  gmgate cert verify --ca ca/ca.crt --host api.example.cn site/api.example.cn.sign.crt
  gmgate cert verify --ca ca/ca.crt --host api.example.cn --enc site/api.example.cn.enc.crt site/api.example.cn.sign.crt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(caFiles) == 0 {
				return errors.New("--ca is required: the trusted CA certificate file")
			}
			roots, err := certs.ReadRoots(caFiles...)
			if err != nil {
				return err
			}
			lines, err := pki.VerifyFiles(args[0], pki.VerifyOptions{Roots: roots, Host: host, EncCert: encCt})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(lines, "\n"))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&caFiles, "ca", nil, "trusted CA certificate file(s)")
	cmd.Flags().StringVar(&host, "host", "", "host name or IP the certificate must name")
	cmd.Flags().StringVar(&encCt, "enc", "", "the TLCP encryption certificate of the pair")
	return cmd
}

package main

import (
	"errors"

	"github.com/gmgate/gmgate/certs"
	"github.com/spf13/cobra"
)

func init() {
	certCmd.AddCommand(newMigrateCmd())
}

func newMigrateCmd() *cobra.Command {
	var (
		from, key, caDir, caPwFile, out, pwFile string
		csr                                     bool
	)
	cmd := &cobra.Command{
		Use:   "migrate --from CERT|DIR [--key KEY] (--ca DIR | --csr) --out DIR",
		Short: "Make an SM2 dual certificate set from existing RSA/ECDSA certificates",
		Long: `Read an existing RSA or ECDSA certificate (or every .pem/.crt/.cer in a
directory) and make the SM2 signing + encryption pair with the same subject
(byte for byte), the same subjectAltNames and the same lifetime (at most 3653
days): issued by the local CA (--ca), or as dual CSRs for a GM CA (--csr).
With --key (or NAME.key beside NAME.crt in a directory) the old key is checked
against the old certificate, so that gmgate can keep serving it to TLS
clients while TLCP clients get the new pair on the same auto port. Prints a
short report of old versus new.`,
		Example: `  gmgate cert migrate --from /etc/nginx/site.crt --key /etc/nginx/site.key --ca ca --out sm2
  gmgate cert migrate --from /etc/nginx/certs --csr --out requests`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from is required: the RSA/ECDSA certificate file or directory")
			}
			if (caDir == "") == !csr {
				return errors.New("give either --ca DIR (issue from the local CA) or --csr (write requests for a GM CA)")
			}
			pw, err := readPassword(pwFile)
			if err != nil {
				return err
			}
			opts := certs.MigrateOptions{From: from, Key: key, OutDir: out, KeyPassword: pw}
			if caDir != "" {
				if opts.CA, err = loadCA(caDir, caPwFile); err != nil {
					return err
				}
			}
			res, err := certs.Migrate(opts)
			if res != nil {
				res.WriteReport(cmd.OutOrStdout())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "existing certificate file, or a directory of them")
	f.StringVar(&key, "key", "", "the existing certificate's key, to check it still pairs (single file only)")
	f.StringVar(&caDir, "ca", "", "issue the SM2 pair from this CA directory")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.BoolVar(&csr, "csr", false, "write dual CSRs instead of issuing")
	f.StringVar(&out, "out", "", "directory for the new files")
	f.StringVar(&pwFile, "key-password-file", "", "encrypt the new keys with the password in this file")
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/spf13/cobra"
)

func init() {
	certCmd.AddCommand(newMigrateCmd())
}

func newMigrateCmd() *cobra.Command {
	var (
		from, key, caDir, caPwFile, out string
		csr, force                      bool
		keys                            keyFlags
	)
	cmd := &cobra.Command{
		Use:   "migrate --from CERT|DIR [--key KEY] [--ca DIR | --csr] [--out DIR]",
		Short: "Make an SM2 dual certificate set from existing RSA/ECDSA certificates",
		Long: `Read an existing RSA or ECDSA certificate (or every .pem/.crt/.cer in a
directory) and make the SM2 signing + encryption pair with the same subject
(byte for byte), the same subjectAltNames and the same lifetime (at most 3653
days): issued by the local CA (--ca), or, without --ca, as two SM2 keys and
dual CSRs for a GM CA (--csr says so explicitly). The files go to --out, the
current directory by default. With --key (or NAME.key beside NAME.crt in a
directory) the old key is checked against the old certificate, so that
gmgate can keep serving it to TLS clients while TLCP clients get the new
pair on the same auto port. Prints a short report of old versus new.`,
		Example: `  gmgate cert migrate --from /etc/nginx/site.crt
  gmgate cert migrate --from /etc/nginx/site.crt --key /etc/nginx/site.key --ca ca --out sm2
  gmgate cert migrate --from /etc/nginx/certs --csr --out requests`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from is required: the RSA/ECDSA certificate file or directory")
			}
			if caDir != "" && csr {
				return errors.New("give either --ca DIR (issue from the local CA) or --csr (write requests for a GM CA), not both")
			}
			enc, err := keys.encryption(cmd)
			if err != nil {
				return err
			}
			if out == "" {
				out = "."
			}
			opts := pki.MigrateOptions{From: from, Key: key, OutDir: out, KeyEncryption: enc, Force: force}
			if caDir != "" {
				if opts.CA, err = loadCA(caDir, caPwFile); err != nil {
					return err
				}
				if err := refuseOtherCA(force, filepath.Join(out, pki.CACertFile), opts.CA, overwriteFix); err != nil {
					return err
				}
			}
			res, err := pki.Migrate(opts)
			if res != nil {
				w := cmd.OutOrStdout()
				res.WriteReport(w)
				if err == nil && opts.CA == nil && len(res.Migrated) > 0 {
					m := res.Migrated[0]
					fmt.Fprintf(w, "next: send the requests to your GM CA, or sign them with a local SM2 CA:\n  gmgate cert sign --ca DIR --csr %s --csr %s\n", m.CSRFiles.SignCSR, m.CSRFiles.EncCSR)
					if !csr {
						outFlag := ""
						if out != "." {
							outFlag = " --out " + out
						}
						fmt.Fprintf(w, "(to issue the pair from a local CA instead, replacing these keys: gmgate cert migrate --from %s --ca DIR%s --force)\n", from, outFlag)
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "existing certificate file, or a directory of them")
	f.StringVar(&key, "key", "", "the existing certificate's key, to check it still pairs (single file only)")
	f.StringVar(&caDir, "ca", "", "issue the SM2 pair from this CA directory")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.BoolVar(&csr, "csr", false, "write dual CSRs for a GM CA (what happens without --ca)")
	f.StringVar(&out, "out", "", "directory for the new files (default: the current directory)")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	keys.register(cmd)
	return cmd
}

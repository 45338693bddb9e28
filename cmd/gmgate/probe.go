package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gmgate/gmgate/proxy/probe"
	"github.com/spf13/cobra"
)

func init() {
	var (
		o       probe.Options
		headers []string
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:   "probe https://host:port/path",
		Short: "Connect with TLCP, show what was negotiated, and fetch a URL",
		Long: `Connect to a TLCP server, print the cipher suite, the server's signing and
encryption certificates and the time each step took (on stderr), then send
one HTTP request and print the response body (on stdout), as curl -v does.`,
		Example: `  gmgate probe --ca ca.crt https://127.0.0.1:8443/
  gmgate probe --ca ca.crt --sni api.example.cn --resume https://10.0.0.1/healthz
  gmgate probe -k --suite ECC_SM4_CBC_SM3 https://gm.example.cn/
  gmgate probe --ca ca.crt --cert client.sign.crt --key client.sign.key \
      --enc-cert client.enc.crt --enc-key client.enc.key https://127.0.0.1:8443/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.URL = args[0]
			if (o.SignCert == "") != (o.SignKey == "") || (o.EncCert == "") != (o.EncKey == "") {
				return fmt.Errorf("a client certificate needs its key: give --cert with --key (and --enc-cert with --enc-key)")
			}
			if o.EncCert != "" && o.SignCert == "" {
				return fmt.Errorf("--enc-cert needs --cert: the signing certificate comes first")
			}
			o.Header = http.Header{}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("header %q: write it as \"Name: value\"", h)
				}
				o.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			info := cmd.ErrOrStderr()
			if quiet {
				info = nil
			}
			res, err := probe.Run(cmd.Context(), o, info)
			if res != nil && len(res.Body) > 0 {
				_, _ = cmd.OutOrStdout().Write(res.Body)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.CAFile, "ca", "", "PEM file of the CA certificates to trust (default: the system pool)")
	f.BoolVarP(&o.Insecure, "insecure", "k", false, "do not verify the server's certificates")
	f.StringVar(&o.ServerName, "sni", "", "server name to verify and send as SNI (default: the URL's host, not sent)")
	f.StringVar(&o.SignCert, "cert", "", "client signing certificate (PEM) for client authentication")
	f.StringVar(&o.SignKey, "key", "", "client signing key: a file or key reference")
	f.StringVar(&o.EncCert, "enc-cert", "", "client encryption certificate (PEM), needed for ECDHE suites")
	f.StringVar(&o.EncKey, "enc-key", "", "client encryption key: a file or key reference")
	f.StringSliceVar(&o.Suites, "suite", nil, "offer only these cipher suites (ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3)")
	f.BoolVar(&o.Resume, "resume", false, "connect a second time and report whether the session was resumed")
	f.StringVarP(&o.Method, "request", "X", "", "HTTP method (default GET)")
	f.StringVarP(&o.Body, "data", "d", "", "request body")
	f.StringArrayVarP(&headers, "header", "H", nil, `extra request header, "Name: value" (repeatable)`)
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up after this long")
	f.BoolVarP(&quiet, "silent", "s", false, "print only the body")
	rootCmd.AddCommand(cmd)
}

package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gmgate/gmgate/internal/probe"
	"github.com/spf13/cobra"
)

func init() {
	var (
		o       probe.Options
		headers []string
		send    string
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:   "probe https://host:port/path | host:port --send DATA",
		Short: "Connect with TLCP (or TLS 1.3 ShangMi), show what was negotiated, and fetch a URL",
		Long: `Connect to a TLCP server, print the cipher suite, the server's signing and
encryption certificates and the time each step took (on stderr), then send
one HTTP request and print the response body (on stdout), as curl -v does.

--protocol tls13-sm speaks TLS 1.3 with the ShangMi suites of RFC 8998
instead (TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3, sm2sig_sm3), as a tls13sm://
upstream does, and prints the suite, the key exchange group (curveSM2 or
curveSM2MLKEM768), whether the server asked again for a key share
(HelloRetryRequest) and, with --resume, whether the ticket resumed. --group
restricts the groups offered (the first gets the key share), --suite the
suites; the client certificate is --cert and --key alone.

-H "Host: name" sets the request's Host (for a site routed by name, probed
by address); other -H headers are sent as given. --resolve host:port:addr
connects to addr while the URL's host is still the name verified and sent.
The URL's host name goes out as SNI, as curl sends it, so that a listener
with several sites answers with that site; an IP address is not sent.
--sni NAME sends and verifies another name; --no-sni sends none, for TLCP
servers that refuse ClientHello extensions (GmSSL 3.1). --profile gmssl
sends no SNI unless --sni is given.
With --resume a second connection checks resumption and sends the request
again; both bodies are printed. --resume-at ADDR makes that check at another
address, such as another replica of a tier that shares sessions through
session_store (repeatable: one connection to each, each offering the first
connection's session; a bare host takes the URL's port). These checks start
200 ms after the first exchange, time for its session to reach the store. A
check that ends in a full handshake is reported, not an error.

--http2 offers HTTP/2 by ALPN (h2, http/1.1) and speaks it when the server
chooses h2, as a tlcp:// upstream with http2: true does; GmSSL 3.1 servers
refuse ALPN.

For a service that does not speak HTTP, give host:port and --send DATA
(\r \n \t \\ and \xHH are understood) or --raw to send standard input:
the data is sent, the sending side closed, and everything the server answers
until it closes the connection is printed.`,
		Example: `  gmgate probe --ca ca.crt https://127.0.0.1:8443/
  gmgate probe --ca ca.crt -H "Host: api.example.cn" --resume https://10.0.0.1/healthz
  gmgate probe --ca ca.crt --resolve api.example.cn:443:10.0.0.1 https://api.example.cn/
  gmgate probe --ca ca.crt --resolve api.example.cn:443:10.0.0.1 \
      --resume-at 10.0.0.2 --resume-at 10.0.0.3 https://api.example.cn/
  gmgate probe -k --suite ECC_SM4_CBC_SM3 https://gm.example.cn/
  gmgate probe --ca ca.crt --http2 https://grpc.partner.cn/
  gmgate probe --ca ca.crt --cert client.sign.crt --key client.sign.key https://127.0.0.1:8443/
  gmgate probe --ca ca.crt --cert client.sign.crt --key client.sign.key \
      --enc-cert client.enc.crt --enc-key client.enc.key https://127.0.0.1:8443/
  gmgate probe --ca ca.crt --profile gmssl --cert client.sign.crt --key client.sign.key \
      --enc-cert client.enc.crt --enc-key client.enc.key https://gmssl-server.example.cn/
  gmgate probe --ca ca.crt --protocol tls13-sm --resume https://partner.example.cn/
  gmgate probe --ca ca.crt --protocol tls13-sm --group curveSM2 --cert client.sign.crt --key client.sign.key https://127.0.0.1:4443/
  gmgate probe --ca ca.crt --send 'PING\r\n' 10.0.0.7:6380
  printf 'QUIT\r\n' | gmgate probe --ca ca.crt --raw db.example.cn:5433`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.URL = args[0]
			if (o.SignCert == "") != (o.SignKey == "") {
				return fmt.Errorf("a client certificate needs its key: give --cert with --key")
			}
			if (o.EncCert == "") != (o.EncKey == "") {
				return fmt.Errorf("an encryption certificate needs its key: give --enc-cert with --enc-key")
			}
			if o.EncCert != "" && o.SignCert == "" {
				return fmt.Errorf("--enc-cert needs --cert: the signing certificate comes first")
			}
			if cmd.Flags().Changed("send") {
				data, err := unescape(send)
				if err != nil {
					return fmt.Errorf("--send: %w", err)
				}
				o.Raw, o.Send = true, data
			}
			if o.Raw {
				if o.Method != "" || o.Body != "" || len(headers) > 0 || o.HTTP2 {
					return fmt.Errorf("-X, -d, -H and --http2 make an HTTP request; --send and --raw send bytes as they are")
				}
				if o.Send == nil {
					o.Stdin = cmd.InOrStdin()
				}
			}
			o.Header = http.Header{}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(k) == "" {
					return fmt.Errorf("-H %q: write it as \"Name: value\"", h)
				}
				o.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			info := cmd.ErrOrStderr()
			if quiet {
				info = nil
			}
			res, err := probe.Run(cmd.Context(), o, info)
			if res != nil {
				out := cmd.OutOrStdout()
				_, _ = out.Write(res.Body)
				for _, r := range res.Resumptions {
					_, _ = out.Write(r.Body)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.CAFile, "ca", "", "PEM file of the CA certificates to trust (default: the system pool)")
	f.BoolVarP(&o.Insecure, "insecure", "k", false, "do not verify the server's certificates")
	f.StringVar(&o.ServerName, "sni", "", "server name to verify and send as SNI (default: the URL's host, sent when it is a name; not sent with --profile gmssl)")
	f.BoolVar(&o.NoSNI, "no-sni", false, "send no SNI (the URL's host is still verified), for TLCP servers that refuse ClientHello extensions")
	f.StringArrayVar(&o.Resolve, "resolve", nil, "connect to ADDR for HOST:PORT, as curl does: HOST:PORT:ADDR (repeatable)")
	f.StringVar(&o.SignCert, "cert", "", "client signing certificate (PEM) for client authentication; alone (with --key) for peers that want only the signing certificate")
	f.StringVar(&o.SignKey, "key", "", "client signing key: a file or key reference")
	f.StringVar(&o.EncCert, "enc-cert", "", "client encryption certificate (PEM), needed for ECDHE suites")
	f.StringVar(&o.EncKey, "enc-key", "", "client encryption key: a file or key reference")
	f.StringSliceVar(&o.Suites, "suite", nil, "offer only these cipher suites (ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3; with --protocol tls13-sm TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3)")
	f.StringVar(&o.Protocol, "protocol", probe.ProtocolTLCP, "protocol to speak: tlcp, or tls13-sm (TLS 1.3 with the ShangMi suites of RFC 8998)")
	f.StringSliceVar(&o.Groups, "group", nil, "with --protocol tls13-sm: offer only these key exchange groups, in order (curveSM2MLKEM768, curveSM2)")
	f.StringVar(&o.Profile, "profile", "standard", "client profile: standard (Tongsuo, gotlcp, gmgate and most servers) or gmssl (GmSSL 3 servers that ask for a client certificate: signing certificate alone with the ECC suites, 71-byte ECDHE key exchange, CertificateVerify over the raw handshake), or auto (standard, then gmssl if the server refuses its answer to a CertificateRequest)")
	f.BoolVar(&o.HTTP2, "http2", false, "offer HTTP/2 by ALPN (h2, http/1.1) and speak it if the server chooses h2 (GmSSL 3.1 servers refuse ALPN)")
	f.BoolVar(&o.Resume, "resume", false, "connect a second time, report whether the session was resumed, and send the request again")
	f.StringArrayVar(&o.ResumeAt, "resume-at", nil, "check resumption at ADDR (host:port, or a host with the URL's port) instead: another replica sharing sessions; repeatable, one connection each")
	f.StringVarP(&o.Method, "request", "X", "", "HTTP method (default GET)")
	f.StringVarP(&o.Body, "data", "d", "", "request body")
	f.StringArrayVarP(&headers, "header", "H", nil, `request header, "Name: value" (repeatable); "Host: name" sets the Host`)
	f.StringVar(&send, "send", "", `raw mode: send these bytes instead of an HTTP request (\r, \n, \t, \\, \xHH understood)`)
	f.BoolVar(&o.Raw, "raw", false, "raw mode: send standard input instead of an HTTP request")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up after this long")
	f.BoolVarP(&quiet, "silent", "s", false, "print only the body")
	rootCmd.AddCommand(cmd)
}

// unescape reads the escapes of --send: \r \n \t \0 \\ and \xHH.
func unescape(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 == len(s) {
			return nil, fmt.Errorf("%q ends with a lone backslash (write \\\\ for one)", s)
		}
		i++
		switch s[i] {
		case 'r':
			out = append(out, '\r')
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case '0':
			out = append(out, 0)
		case '\\':
			out = append(out, '\\')
		case 'x':
			if i+2 >= len(s) {
				return nil, fmt.Errorf("%q: \\x needs two hex digits", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("%q: \\x%s is not two hex digits", s, s[i+1:i+3])
			}
			out = append(out, byte(v))
			i += 2
		default:
			return nil, fmt.Errorf("%q: unknown escape \\%c (known: \\r \\n \\t \\0 \\\\ \\xHH)", s, s[i])
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

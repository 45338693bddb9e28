package probe

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// The protocols a probe speaks (Options.Protocol).
const (
	ProtocolTLCP = "tlcp"
	// ProtocolTLS13SM is TLS 1.3 with the ShangMi suites of RFC 8998
	// (package tlcp/tls13), as tls13sm:// upstreams speak it.
	ProtocolTLS13SM = "tls13-sm"
)

func (o Options) tls13SM() bool { return o.Protocol == ProtocolTLS13SM }

// tls13Config is the client configuration of a TLS 1.3 ShangMi probe.
// The TLCP-only options are refused with what to do instead.
func (o Options) tls13Config(host string) (*tls13.Config, error) {
	switch {
	case o.EncCert != "" || o.EncKey != "":
		return nil, errors.New("--enc-cert and --enc-key are TLCP's: TLS 1.3 authenticates with one certificate, give it with --cert and --key")
	case o.Profile != "" && o.Profile != tlcp.ProfileStandard:
		return nil, errors.New("--profile chooses among TLCP peers; it has no meaning with --protocol " + ProtocolTLS13SM)
	case o.NoSNI:
		return nil, errors.New("--no-sni: TLS 1.3 sends the name it verifies (never an IP address); give --sni NAME to send another")
	}
	cfg := &tls13.Config{ServerName: host, InsecureSkipVerify: o.Insecure}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
	}
	if o.CAFile != "" {
		pem, err := certs.ReadCAFile("--ca", o.CAFile)
		if err != nil {
			return nil, err
		}
		pool, err := certs.CAPool(o.CAFile, pem)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	for _, s := range o.Suites {
		id, ok := config.TLS13SuiteByName(s)
		if !ok {
			return nil, fmt.Errorf("--suite: %q is not a TLS 1.3 ShangMi suite (known: %s, %s)", s, tls13.CipherSuiteName(tls13.TLS_SM4_GCM_SM3), tls13.CipherSuiteName(tls13.TLS_SM4_CCM_SM3))
		}
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	for _, g := range o.Groups {
		id, ok := config.TLS13GroupByName(g)
		if !ok {
			return nil, fmt.Errorf("--group: unknown group %q (known: %s, %s)", g, tls13.CurveSM2, tls13.CurveSM2MLKEM768)
		}
		cfg.CurvePreferences = append(cfg.CurvePreferences, id)
	}
	if o.HTTP2 && !o.Raw {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if o.SignCert != "" || o.SignKey != "" {
		c, _, err := certs.LoadTLCPFiles(certs.TLCPFiles{SignCert: o.SignCert, SignKey: o.SignKey},
			certs.LoadOptions{SignOnly: true, Names: certs.FieldNames{SignCert: "--cert", SignKey: "--key"}})
		if err != nil {
			return nil, err
		}
		signer, ok := c.SignKey.(crypto.Signer)
		if !ok {
			return nil, errors.New("--key: the key cannot sign")
		}
		cfg.Certificates = []tls13.Certificate{{Certificate: c.SignCertificate, PrivateKey: signer, Leaf: c.SignLeaf}}
	}
	return cfg, nil
}

// dial13 connects and completes a TLS 1.3 ShangMi handshake, reporting
// both.
func (p *prober) dial13(ctx context.Context, ex *exchange, addr, check string) (net.Conn, error) {
	t0 := time.Now()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, p.overTime(ctx, err, "could not connect to "+addr)
	}
	ex.connect = time.Since(t0)
	if check == "" {
		fmt.Fprintf(p.info, "* connected to %s (%s) in %s\n", addr, raw.RemoteAddr(), round(ex.connect))
	}
	t1 := time.Now()
	c := tls13.Client(raw, p.cfg13)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		if timedOut(ctx) {
			return nil, fmt.Errorf("the TLS 1.3 ShangMi handshake with %s did not finish within --timeout %s: the server took the connection and did not answer as a TLS 1.3 server; it may speak another protocol on this port, or be overloaded", addr, p.o.Timeout)
		}
		return nil, describeTLS13Failure(err)
	}
	ex.handshake = time.Since(t1)
	st := c.ConnectionState()
	ex.state13 = st
	ex.resumed, ex.suite, ex.alpn = st.DidResume, tls13.CipherSuiteName(st.CipherSuite), st.NegotiatedProtocol
	if check != "" {
		verdict := "no (full handshake)"
		if st.DidResume {
			verdict = "yes"
		}
		fmt.Fprintf(p.info, "* %s resumed the session: %s (%s, group %s, handshake %s)\n", check, verdict, ex.suite, st.Group, round(ex.handshake))
	} else {
		writeState13(p.info, st, ex.handshake, !p.o.Insecure)
	}
	return c, nil
}

// describeTLS13Failure explains a failed TLS 1.3 ShangMi handshake where
// the cause is likely a server that speaks something else.
func describeTLS13Failure(err error) error {
	var ae *tls13.AlertError
	switch {
	case errors.As(err, &ae) && ae.Remote && (ae.Alert == tls13.AlertProtocolVersion || ae.Alert == tls13.AlertHandshakeFailure || ae.Alert == tls13.AlertInsufficientSecurity):
		return fmt.Errorf("%w (the server may not offer TLS 1.3 with the ShangMi suites, sm2sig_sm3 and the groups offered: try --group curveSM2, or leave out --protocol for TLCP)", err)
	case errors.As(err, &ae) && ae.Remote && ae.Alert == tls13.AlertCertificateRequired:
		return fmt.Errorf("%w (the server wants a client certificate: give --cert and --key)", err)
	case errors.As(err, &ae):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the server closed the connection during the TLS 1.3 ShangMi handshake without sending an alert: it may not speak TLS 1.3 with the ShangMi suites on this port (%v)", err)
	}
	return err
}

// afterHandshake explains an alert that ends a TLS 1.3 exchange: the
// server checks the client's certificate after the client's handshake is
// done, so its refusal arrives with the first read.
func (p *prober) afterHandshake(err error) error {
	if p.cfg13 == nil || !errors.As(err, new(*tls13.AlertError)) {
		return err
	}
	return describeTLS13Failure(err)
}

func writeState13(w io.Writer, st tls13.ConnectionState, d time.Duration, verified bool) {
	resumed := "no"
	if st.DidResume {
		resumed = "yes"
	}
	hrr := ""
	if st.DidHelloRetryRequest {
		hrr = ", after a HelloRetryRequest"
	}
	fmt.Fprintf(w, "* TLS 1.3 ShangMi handshake done in %s: %s, group %s%s (resumed: %s)\n", round(d), tls13.CipherSuiteName(st.CipherSuite), st.Group, hrr, resumed)
	if st.NegotiatedProtocol != "" {
		fmt.Fprintf(w, "* ALPN: %s\n", st.NegotiatedProtocol)
	}
	writeCertificates(w, st.PeerCertificates, st.VerifiedChains, verified, func(i int, _ *smx509.Certificate) string {
		if i == 0 {
			return "leaf"
		}
		return "chain"
	})
}

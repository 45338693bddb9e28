// Package probe is a curl-like TLCP client: it connects to a TLCP server,
// reports what was negotiated (suite, certificates, resumption) and how
// long each step took, and sends one HTTP request. It is what
// `gmgate probe` runs, and what tests use to reach a gateway as a user
// would.
package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/tlcp"
)

// Options describe one probe.
type Options struct {
	// URL is https://host:port/path.
	URL string
	// Method is GET when empty; Body is sent with it.
	Method string
	Body   string
	Header http.Header
	// CAFile is a PEM file of the CA certificates to trust; the system
	// pool when empty.
	CAFile string
	// Insecure skips verification of the server's certificates.
	Insecure bool
	// ServerName, when set, is verified in the server's certificate and
	// sent as SNI (by default no SNI is sent, as some TLCP servers refuse
	// ClientHello extensions).
	ServerName string
	// Client identity for client authentication: a signing certificate
	// and key, and optionally an encryption pair (needed for ECDHE).
	SignCert, SignKey, EncCert, EncKey string
	// Suites restrict the offered cipher suites (names such as
	// ECC_SM4_GCM_SM3); all by default.
	Suites []string
	// Resume makes a second connection and reports whether it resumed the
	// first one's session.
	Resume bool
	// Timeout bounds the whole probe; 30s when zero.
	Timeout time.Duration
	// MaxBody bounds the body read; 10 MiB when zero.
	MaxBody int64
}

// Result is what a probe found.
type Result struct {
	Addr         string
	State        tlcp.ConnectionState
	Connect      time.Duration
	Handshake    time.Duration
	FirstByte    time.Duration
	Total        time.Duration
	Status       int
	Proto        string
	Header       http.Header
	Body         []byte
	Resumed      bool // second connection resumed (with Options.Resume)
	ResumeTime   time.Duration
	ResumeSuite  string
	ResumeTested bool
}

// Run performs the probe. Progress and findings are written to info (nil
// for none) as curl -v does; the body is in the Result.
func Run(ctx context.Context, o Options, info io.Writer) (*Result, error) {
	if info == nil {
		info = io.Discard
	}
	// The transport reports from its own goroutines.
	info = &lockedWriter{w: info}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxBody == 0 {
		o.MaxBody = 10 << 20
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q: give an https://host:port/ URL", o.URL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg, err := o.tlcpConfig(u.Hostname())
	if err != nil {
		return nil, err
	}
	res := &Result{Addr: addr}
	start := time.Now()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		t0 := time.Now()
		raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		res.Connect = time.Since(t0)
		fmt.Fprintf(info, "* connected to %s (%s) in %s\n", addr, raw.RemoteAddr(), round(res.Connect))
		t1 := time.Now()
		c := tlcp.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, describeHandshakeError(err)
		}
		res.Handshake = time.Since(t1)
		res.State = c.ConnectionState()
		writeState(info, res.State, res.Handshake, !o.Insecure)
		return c, nil
	}
	tr := &http.Transport{DialTLSContext: dial, DisableCompression: true}
	defer tr.CloseIdleConnections()
	method := o.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if o.Body != "" {
		body = strings.NewReader(o.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range o.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("User-Agent", "gmgate-probe")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteHeaders: func() {
			fmt.Fprintf(info, "> %s %s HTTP/1.1\n> Host: %s\n", method, u.RequestURI(), u.Host)
			for _, k := range sortedKeys(req.Header) {
				fmt.Fprintf(info, "> %s: %s\n", k, strings.Join(req.Header[k], ", "))
			}
		},
		GotFirstResponseByte: func() { res.FirstByte = time.Since(start) },
	}))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res.Status, res.Proto, res.Header = resp.StatusCode, resp.Proto, resp.Header
	fmt.Fprintf(info, "< %s %s\n", resp.Proto, resp.Status)
	for _, k := range sortedKeys(resp.Header) {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(info, "< %s: %s\n", k, v)
		}
	}
	res.Body, err = io.ReadAll(io.LimitReader(resp.Body, o.MaxBody))
	if err != nil {
		return res, fmt.Errorf("reading the body: %w", err)
	}
	res.Total = time.Since(start)
	fmt.Fprintf(info, "* first byte after %s, total %s, %d body bytes\n", round(res.FirstByte), round(res.Total), len(res.Body))

	if o.Resume {
		if err := o.resume(ctx, addr, cfg, res, info); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (o Options) tlcpConfig(host string) (*tlcp.Config, error) {
	cfg := &tlcp.Config{
		ServerName:         host,
		InsecureSkipVerify: o.Insecure,
		ClientSessionCache: tlcp.NewLRUClientSessionCache(4, time.Hour),
	}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
		cfg.SendServerName = true
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, err
		}
		pool := smx509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	for _, s := range o.Suites {
		id, ok := tlcp.CipherSuiteByName(s)
		if !ok {
			return nil, fmt.Errorf("unknown cipher suite %q", s)
		}
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	if o.SignCert != "" {
		c, err := certs.LoadTLCP(o.SignCert, o.SignKey, o.EncCert, o.EncKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tlcp.Certificate{*c}
	}
	return cfg, nil
}

func (o Options) resume(ctx context.Context, addr string, cfg *tlcp.Config, res *Result, info io.Writer) error {
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	c := tlcp.Client(raw, cfg)
	t := time.Now()
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("second connection: %w", describeHandshakeError(err))
	}
	res.ResumeTime = time.Since(t)
	st := c.ConnectionState()
	res.ResumeTested, res.Resumed, res.ResumeSuite = true, st.DidResume, tlcp.CipherSuiteName(st.CipherSuite)
	verdict := "no (full handshake)"
	if st.DidResume {
		verdict = "yes"
	}
	fmt.Fprintf(info, "* second connection resumed the session: %s (handshake %s)\n", verdict, round(res.ResumeTime))
	_ = c.Close()
	return nil
}

func describeHandshakeError(err error) error {
	var ae *tlcp.AlertError
	if errors.As(err, &ae) && ae.Remote && ae.Alert == tlcp.AlertProtocolVersion {
		return fmt.Errorf("%w (the server does not speak TLCP on this port)", err)
	}
	return err
}

func writeState(w io.Writer, st tlcp.ConnectionState, d time.Duration, verified bool) {
	resumed := "no"
	if st.DidResume {
		resumed = "yes"
	}
	fmt.Fprintf(w, "* TLCP handshake done in %s: %s (resumed: %s)\n", round(d), tlcp.CipherSuiteName(st.CipherSuite), resumed)
	if st.NegotiatedProtocol != "" {
		fmt.Fprintf(w, "* ALPN: %s\n", st.NegotiatedProtocol)
	}
	for i, c := range st.PeerCertificates {
		role := "chain"
		switch i {
		case 0:
			role = "sign"
		case 1:
			if len(st.PeerCertificates) > 1 && c.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
				role = "enc"
			}
		}
		sum := sha256.Sum256(c.Raw)
		fmt.Fprintf(w, "* certificate %d (%s): subject %q\n", i, role, c.Subject.String())
		fmt.Fprintf(w, "*   issuer %q, serial %s\n", c.Issuer.String(), strings.ToUpper(c.SerialNumber.Text(16)))
		fmt.Fprintf(w, "*   valid %s to %s", c.NotBefore.UTC().Format(time.DateOnly), c.NotAfter.UTC().Format(time.DateOnly))
		if len(c.DNSNames) > 0 || len(c.IPAddresses) > 0 {
			names := append([]string{}, c.DNSNames...)
			for _, ip := range c.IPAddresses {
				names = append(names, ip.String())
			}
			fmt.Fprintf(w, ", names %s", strings.Join(names, " "))
		}
		fmt.Fprintf(w, "\n*   sha256 %s\n", hex.EncodeToString(sum[:]))
	}
	switch {
	case !verified:
		fmt.Fprintln(w, "* server certificate NOT verified (--insecure)")
	case len(st.VerifiedChains) > 0:
		chain := st.VerifiedChains[0]
		fmt.Fprintf(w, "* server certificate verified up to %q\n", chain[len(chain)-1].Subject.String())
	}
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func sortedKeys(h http.Header) []string { return slices.Sorted(maps.Keys(h)) }

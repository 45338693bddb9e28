// Package probe is a curl-like TLCP client: it connects to a TLCP server,
// reports what was negotiated (suite, certificates, resumption) and how
// long each step took, and sends one HTTP request, or raw bytes to a
// service that does not speak HTTP. It is what `gmgate probe` runs, and
// what tests use to reach a gateway as a user would.
package probe

import (
	"cmp"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/internal/tlcphint"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// Options describe one probe.
type Options struct {
	// URL is https://host:port/path. In raw mode host:port (or
	// tlcp://host:port) will do.
	URL string
	// Method is GET when empty; Body is sent with it.
	Method string
	Body   string
	// Header holds extra request headers. A Host header sets the
	// request's Host (the URL's host by default); the others are sent as
	// given, User-Agent included.
	Header http.Header
	// Resolve maps host:port to an address to connect to instead, as
	// curl's --resolve: "host:port:addr". The URL's host is still the
	// name verified in the certificate and sent as Host.
	Resolve []string
	// CAFile is a PEM file of the CA certificates to trust; the system
	// pool when empty.
	CAFile string
	// Insecure skips verification of the server's certificates.
	Insecure bool
	// ServerName, when set, is verified in the server's certificate and
	// sent as SNI. By default the URL's host is, as curl does: sent as SNI
	// when it is a name (not an IP address), unless NoSNI is set or the
	// profile is gmssl (GmSSL 3.1 servers refuse ClientHello extensions).
	ServerName string
	// NoSNI sends no SNI for the URL's host, for TLCP servers that refuse
	// ClientHello extensions; the name is still verified.
	NoSNI bool
	// Client identity for client authentication: a signing certificate
	// and key, and optionally an encryption pair (needed for ECDHE; some
	// peers want the signing certificate alone).
	SignCert, SignKey, EncCert, EncKey string
	// Suites restrict the offered cipher suites (names such as
	// ECC_SM4_GCM_SM3); all by default.
	Suites []string
	// Profile is the client's wire profile (tlcp.ClientProfiles):
	// standard by default, gmssl for GmSSL 3 servers that ask for a
	// client certificate.
	Profile string
	// HTTP2 offers ALPN h2 and http/1.1 and speaks HTTP/2 when the server
	// chooses h2 (HTTP/1.1 otherwise). Off by default: ALPN is an
	// extension, which GmSSL 3.1 servers refuse.
	HTTP2 bool
	// Resume makes a second connection, reports whether it resumed the
	// first one's session, and sends the request again on it.
	Resume bool
	// ResumeAt makes the resumption check at these addresses (host:port;
	// a bare host takes the URL's port) instead of the first connection's:
	// one connection to each, in turn, each offering the session the first
	// connection made, so that replicas sharing a session store can be
	// checked one by one; they start 200 ms after the first exchange, time
	// for its session to reach the store. It implies Resume.
	ResumeAt []string
	// Raw sends Send (or, when Send is nil, what Stdin holds) instead of
	// an HTTP request, closes the sending side, and reads what the server
	// answers until it closes the connection.
	Raw   bool
	Send  []byte
	Stdin io.Reader
	// Protocol is the protocol spoken: ProtocolTLCP (the default, also
	// when empty) or ProtocolTLS13SM (TLS 1.3 with the ShangMi suites of
	// RFC 8998, see tls13sm.go).
	Protocol string
	// Groups restrict the key exchange groups offered over TLS 1.3
	// ShangMi (curveSM2, curveSM2MLKEM768), in preference order.
	Groups []string
	// Timeout bounds the whole probe; 30s when zero.
	Timeout time.Duration
	// MaxBody bounds the body read; 10 MiB when zero.
	MaxBody int64
}

// Result is what a probe found.
type Result struct {
	Addr string
	// State is what a TLCP handshake negotiated; TLS13 what a TLS 1.3
	// ShangMi one did (Options.Protocol).
	State     tlcp.ConnectionState
	TLS13     tls13.ConnectionState
	Connect   time.Duration
	Handshake time.Duration
	FirstByte time.Duration
	Total     time.Duration
	Status    int // 0 in raw mode
	Proto     string
	Header    http.Header
	// Body is the response body, or in raw mode what the server sent.
	Body []byte
	// Resumptions are the resumption checks of Options.Resume and
	// Options.ResumeAt, in order. A check that ends in a full handshake is
	// reported here; one that fails ends the probe with its error.
	Resumptions []Resumption
}

// Resumption is one resumption check: a connection that offered the
// session of the probe's first connection.
type Resumption struct {
	Addr      string
	Resumed   bool
	Handshake time.Duration
	Suite     string
	Status    int // 0 in raw mode
	Header    http.Header
	Body      []byte
}

// Resumed reports whether every resumption check resumed the session; false
// without any.
func (r *Result) Resumed() bool {
	for _, c := range r.Resumptions {
		if !c.Resumed {
			return false
		}
	}
	return len(r.Resumptions) > 0
}

// exchange is one connection's outcome.
type exchange struct {
	state   tlcp.ConnectionState
	state13 tls13.ConnectionState
	// resumed, suite and alpn are what either protocol negotiated.
	resumed                              bool
	suite, alpn                          string
	connect, handshake, firstByte, total time.Duration
	status                               int
	proto                                string
	header                               http.Header
	body                                 []byte
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
	switch o.Protocol {
	case "", ProtocolTLCP, ProtocolTLS13SM:
	default:
		return nil, fmt.Errorf("--protocol: unknown protocol %q (known: %s, %s)", o.Protocol, ProtocolTLCP, ProtocolTLS13SM)
	}
	if len(o.Groups) > 0 && !o.tls13SM() {
		return nil, fmt.Errorf("--group chooses TLS 1.3 key exchange groups: give --protocol %s too", ProtocolTLS13SM)
	}
	u, err := o.target()
	if err != nil {
		return nil, err
	}
	hostPort := u.Host
	if u.Port() == "" {
		hostPort = net.JoinHostPort(u.Hostname(), "443")
	}
	addr, err := resolve(hostPort, o.Resolve, info)
	if err != nil {
		return nil, err
	}
	checks, err := resumeAddrs(addr, u.Port(), o)
	if err != nil {
		return nil, err
	}
	// Every connection offers the session the first one made, and only it:
	// a check that ends in a full handshake does not hand its new session
	// to the next.
	var session interface{ freeze() }
	p := &prober{o: o, url: u, info: info}
	if o.tls13SM() {
		if p.cfg13, err = o.tls13Config(u.Hostname()); err != nil {
			return nil, err
		}
		ticket := &firstSession[tls13.ClientSessionState]{}
		p.cfg13.ClientSessionCache, session = ticket, ticket
	} else {
		if p.cfg, err = o.tlcpConfig(u.Hostname()); err != nil {
			return nil, err
		}
		first := &firstSession[tlcp.ClientSessionState]{}
		p.cfg.ClientSessionCache, session = first, first
	}
	res := &Result{Addr: addr}
	first, err := p.run(ctx, addr, "")
	if first != nil {
		res.TLS13 = first.state13
		res.State, res.Connect, res.Handshake, res.FirstByte, res.Total = first.state, first.connect, first.handshake, first.firstByte, first.total
		res.Status, res.Proto, res.Header, res.Body = first.status, first.proto, first.header, first.body
	}
	if err != nil {
		if first == nil {
			return nil, err
		}
		return res, err
	}
	session.freeze()
	if len(o.ResumeAt) > 0 {
		// A replica writes the session to its shared store after the
		// handshake, off the handshake's path: give it time to land.
		select {
		case <-time.After(storePause):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	for _, check := range checks {
		label := "second connection"
		if len(o.ResumeAt) > 0 {
			label = "connection to " + check
		}
		ex, err := p.run(ctx, check, label)
		if ex != nil {
			res.Resumptions = append(res.Resumptions, Resumption{
				Addr: check, Resumed: ex.resumed, Handshake: ex.handshake,
				Suite:  ex.suite,
				Status: ex.status, Header: ex.header, Body: ex.body,
			})
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", label, err)
		}
	}
	return res, nil
}

// storePause is how long the checks at other addresses wait after the
// first connection's exchange.
const storePause = 200 * time.Millisecond

// resumeAddrs returns the addresses of the resumption checks: addr once
// with Options.Resume alone, each of Options.ResumeAt otherwise.
func resumeAddrs(addr, urlPort string, o Options) ([]string, error) {
	if len(o.ResumeAt) == 0 {
		if o.Resume {
			return []string{addr}, nil
		}
		return nil, nil
	}
	if urlPort == "" {
		urlPort = "443"
	}
	var out []string
	for _, a := range o.ResumeAt {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			// No port: a name, or an address (IPv6 with or without brackets).
			host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), urlPort
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || !validHost(host) {
			return nil, fmt.Errorf("--resume-at %q: give host:port, or a host to use the URL's port", a)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// validHost reports whether h is an IP address or a DNS name.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// firstSession is the probe's client session cache, for TLCP sessions and
// TLS 1.3 tickets alike: it keeps what the first connection made (the
// last ticket, when a server sends several), and after freeze ignores the
// sessions that later connections make or drop.
type firstSession[S any] struct {
	mu     sync.Mutex
	cs     *S
	frozen bool
}

func (f *firstSession[S]) Get(string) (*S, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cs, f.cs != nil
}

func (f *firstSession[S]) Put(_ string, cs *S) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.cs = cs
	}
}

func (f *firstSession[S]) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

// target parses the URL: https://host[:port]/path, or in raw mode also
// host:port and tlcp://host:port.
func (o Options) target() (*url.URL, error) {
	raw := o.URL
	if !strings.Contains(raw, "://") {
		if !o.Raw {
			return nil, fmt.Errorf("%q: give an https://host:port/ URL (or host:port with --send or --raw for a service that does not speak HTTP)", o.URL)
		}
		raw = "tlcp://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Host == "":
	case u.Scheme == "https":
		return u, nil
	case o.Raw && u.Scheme == "tlcp":
		if u.Port() == "" {
			return nil, fmt.Errorf("%q: give the port, host:port", o.URL)
		}
		return u, nil
	}
	if o.Raw {
		return nil, fmt.Errorf("%q: give host:port (or an https://host:port/ URL)", o.URL)
	}
	return nil, fmt.Errorf("%q: give an https://host:port/ URL (or host:port with --send or --raw for a service that does not speak HTTP)", o.URL)
}

// resolve applies the --resolve entries to host:port.
func resolve(hostPort string, entries []string, info io.Writer) (string, error) {
	host, port, _ := net.SplitHostPort(hostPort)
	matched := false
	addr := hostPort
	for _, e := range entries {
		h, rest, ok1 := strings.Cut(e, ":")
		p, a, ok2 := strings.Cut(rest, ":")
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if !ok1 || !ok2 || h == "" || p == "" || a == "" {
			return "", fmt.Errorf("--resolve %q: write it as host:port:address", e)
		}
		if net.ParseIP(a) == nil {
			return "", fmt.Errorf("--resolve %q: %q is not an IP address", e, a)
		}
		if strings.EqualFold(h, host) && p == port && !matched {
			addr, matched = net.JoinHostPort(a, port), true
			fmt.Fprintf(info, "* --resolve: %s goes to %s\n", hostPort, addr)
		}
	}
	if len(entries) > 0 && !matched {
		fmt.Fprintf(info, "* --resolve: no entry for %s; connecting to it as named\n", hostPort)
	}
	return addr, nil
}

func (o Options) tlcpConfig(host string) (*tlcp.Config, error) {
	cfg := &tlcp.Config{
		ServerName:         host,
		InsecureSkipVerify: o.Insecure,
	}
	if o.ServerName != "" && o.NoSNI {
		return nil, errors.New("--sni sends a name and --no-sni sends none: give one of them")
	}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
	}
	cfg.SendServerName = o.sniReason(host) == ""
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
		id, ok := tlcp.CipherSuiteByName(s)
		if !ok {
			var known []string
			for _, cs := range tlcp.CipherSuites() {
				known = append(known, cs.Name)
			}
			return nil, fmt.Errorf("--suite: unknown cipher suite %q (known: %s)", s, strings.Join(known, ", "))
		}
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	if o.Profile != tlcphint.ProfileAuto {
		if err := cfg.SetClientProfile(o.Profile); err != nil {
			return nil, fmt.Errorf("--profile: %w (or %s)", err, tlcphint.ProfileAuto)
		}
	}
	if o.HTTP2 && !o.Raw {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if o.SignCert != "" || o.SignKey != "" || o.EncCert != "" || o.EncKey != "" {
		c, _, err := certs.LoadTLCPFiles(certs.TLCPFiles{SignCert: o.SignCert, SignKey: o.SignKey, EncCert: o.EncCert, EncKey: o.EncKey},
			certs.LoadOptions{SignOnly: true, Names: certs.FieldNames{SignCert: "--cert", SignKey: "--key", EncCert: "--enc-cert", EncKey: "--enc-key"}})
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tlcp.Certificate{*c}
	}
	return cfg, nil
}

// sniReason says why no SNI is sent for the URL's host; "" when it is.
func (o Options) sniReason(host string) string {
	switch {
	case o.ServerName != "":
		return ""
	case o.NoSNI:
		return "--no-sni"
	case net.ParseIP(strings.Trim(host, "[]")) != nil:
		return "the URL's host is an IP address"
	case o.Profile == tlcp.ProfileGmSSL:
		return "--profile gmssl sends no extension unless --sni is given"
	}
	return ""
}

// prober makes the probe's connections.
type prober struct {
	o     Options
	cfg   *tlcp.Config
	cfg13 *tls13.Config // instead of cfg, for TLS 1.3 ShangMi
	url   *url.URL
	info  io.Writer
	sent  []byte // raw mode: what to send, read once
	// took is the profile the last handshake took ("" before one did).
	took string
}

// run makes one connection to addr and its exchange; check names a
// resumption check in the report ("" for the first connection).
func (p *prober) run(ctx context.Context, addr, check string) (*exchange, error) {
	if p.o.Raw {
		return p.raw(ctx, addr, check)
	}
	return p.http(ctx, addr, check)
}

// dial connects and completes the handshake, reporting both. With
// --profile auto a server that refuses the standard profile's answer to
// its CertificateRequest is tried again with gmssl, on a new connection,
// and the profile it took is used for the connections that follow.
func (p *prober) dial(ctx context.Context, ex *exchange, addr, check string) (net.Conn, error) {
	if p.cfg13 != nil {
		return p.dial13(ctx, ex, addr, check)
	}
	profile := p.o.Profile
	if profile == tlcphint.ProfileAuto {
		profile = cmp.Or(p.took, tlcp.ProfileStandard)
	}
	c, facts, err := p.handshake(ctx, ex, addr, check, profile)
	if err != nil && facts != nil && p.o.Profile == tlcphint.ProfileAuto && profile == tlcp.ProfileStandard && tlcphint.ProfileRefused(err, *facts) && !timedOut(ctx) {
		fmt.Fprintf(p.info, "* profile standard refused (%v): trying gmssl\n", err)
		c2, facts2, err2 := p.handshake(ctx, ex, addr, check, tlcp.ProfileGmSSL)
		switch {
		case err2 == nil:
			c, err, profile = c2, nil, tlcp.ProfileGmSSL
		case facts2 != nil && tlcphint.ProfileRefused(err2, *facts2):
			facts.Profile = tlcphint.ProfileAuto
		default:
			c, facts, err = nil, facts2, err2
		}
	}
	if err != nil {
		if facts == nil {
			return nil, err
		}
		if timedOut(ctx) {
			return nil, fmt.Errorf("the TLCP handshake with %s did not finish within --timeout %s: the server took the connection and did not answer as a TLCP server; it may speak another protocol on this port, or be overloaded", addr, p.o.Timeout)
		}
		return nil, p.describeHandshakeError(err, *facts)
	}
	if p.o.Profile == tlcphint.ProfileAuto && check == "" {
		fmt.Fprintf(p.info, "* client profile: %s (--profile auto)\n", profile)
	}
	p.took = profile
	ex.state = c.ConnectionState()
	ex.resumed, ex.suite, ex.alpn = ex.state.DidResume, tlcp.CipherSuiteName(ex.state.CipherSuite), ex.state.NegotiatedProtocol
	if check != "" {
		verdict := "no (full handshake)"
		if ex.state.DidResume {
			verdict = "yes"
		}
		fmt.Fprintf(p.info, "* %s resumed the session: %s (handshake %s)\n", check, verdict, round(ex.handshake))
	} else {
		writeState(p.info, ex.state, ex.handshake, !p.o.Insecure)
	}
	return c, nil
}

// handshake connects to addr and completes a handshake under profile;
// facts is nil when the connection failed, what the client saw of the
// handshake otherwise.
func (p *prober) handshake(ctx context.Context, ex *exchange, addr, check, profile string) (*tlcp.Conn, *tlcphint.Facts, error) {
	t0 := time.Now()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, p.overTime(ctx, err, "could not connect to "+addr)
	}
	ex.connect = time.Since(t0)
	if check == "" {
		fmt.Fprintf(p.info, "* connected to %s (%s) in %s\n", addr, raw.RemoteAddr(), round(ex.connect))
	}
	t1 := time.Now()
	cfg, facts := tlcphint.Record(p.cfg, profile)
	_ = cfg.SetClientProfile(profile) // checked by newConfig
	c := tlcp.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, facts, err
	}
	ex.handshake = time.Since(t1)
	return c, facts, nil
}

func (p *prober) http(ctx context.Context, addr, check string) (*exchange, error) {
	ex := &exchange{}
	start := time.Now()
	// The connection is made first, so that the server's ALPN choice
	// decides the HTTP version the transport speaks on it.
	c, err := p.dial(ctx, ex, addr, check)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	conns := make(chan net.Conn, 1)
	conns <- c
	dial := func(context.Context, string, string) (net.Conn, error) {
		select {
		case conn := <-conns:
			return conn, nil
		default:
			return nil, errors.New("the server closed the probe's connection")
		}
	}
	tr := &http.Transport{DialTLSContext: dial, DisableCompression: true}
	version := "HTTP/1.1"
	if ex.alpn == "h2" {
		// An https:// request over a connection that is not a *tls.Conn
		// is spoken to in HTTP/2 from the first byte when that is the
		// transport's only protocol.
		version = "HTTP/2"
		tr.Protocols = &http.Protocols{}
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	var mu sync.Mutex
	method := p.o.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if p.o.Body != "" {
		body = strings.NewReader(p.o.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range p.o.Header {
		if http.CanonicalHeaderKey(k) == "Host" {
			if len(vs) > 0 {
				req.Host = vs[len(vs)-1]
			}
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "gmgate-probe")
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteHeaders: func() {
			fmt.Fprintf(p.info, "> %s %s %s\n> Host: %s\n", method, p.url.RequestURI(), version, req.Host)
			for _, k := range sortedKeys(req.Header) {
				fmt.Fprintf(p.info, "> %s: %s\n", k, strings.Join(req.Header[k], ", "))
			}
		},
		GotFirstResponseByte: func() {
			mu.Lock()
			ex.firstByte = time.Since(start)
			mu.Unlock()
		},
	}))
	resp, err := tr.RoundTrip(req)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return ex, p.overTime(ctx, p.afterHandshake(err), "no response from "+addr)
	}
	defer resp.Body.Close()
	ex.status, ex.proto, ex.header = resp.StatusCode, resp.Proto, resp.Header
	fmt.Fprintf(p.info, "< %s %s\n", resp.Proto, printable(resp.Status))
	for _, k := range sortedKeys(resp.Header) {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(p.info, "< %s: %s\n", k, v)
		}
	}
	ex.body, err = io.ReadAll(io.LimitReader(resp.Body, p.o.MaxBody))
	if err != nil {
		return ex, p.overTime(ctx, fmt.Errorf("reading the body: %w", err), "the body from "+addr+" did not end")
	}
	ex.total = time.Since(start)
	fmt.Fprintf(p.info, "* first byte after %s, total %s, %d body bytes\n", round(ex.firstByte), round(ex.total), len(ex.body))
	return ex, nil
}

// raw sends the raw data, closes the sending side and reads the answer
// until the server closes.
func (p *prober) raw(ctx context.Context, addr, check string) (*exchange, error) {
	if p.sent == nil {
		data := p.o.Send
		if data == nil && p.o.Stdin != nil {
			var err error
			if data, err = io.ReadAll(io.LimitReader(p.o.Stdin, p.o.MaxBody)); err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
		}
		p.sent = append([]byte{}, data...)
	}
	ex := &exchange{}
	start := time.Now()
	c, err := p.dial(ctx, ex, addr, check)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(p.sent); err != nil {
		return ex, fmt.Errorf("sending: %w", err)
	}
	fmt.Fprintf(p.info, "> %d bytes sent; closing the sending side\n", len(p.sent))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		return ex, fmt.Errorf("closing the sending side: %w", err)
	}
	ex.body, err = readUntilClose(c, p.o.MaxBody, &ex.firstByte, start)
	err = p.afterHandshake(err)
	ex.total = time.Since(start)
	fmt.Fprintf(p.info, "< %d bytes received in %s\n", len(ex.body), round(ex.total))
	return ex, p.overTime(ctx, err, "the answer from "+addr+" did not end")
}

// overTime says that the probe's time ran out during what, when err
// came from that (the context's end, or the connection's deadline, which
// is the context's); other errors are returned as they are.
func (p *prober) overTime(ctx context.Context, err error, what string) error {
	if err == nil || !timedOut(ctx) && !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%s within --timeout %s", what, p.o.Timeout)
}

// timedOut reports whether ctx ended at its deadline (the probe's
// timeout), not by a cancel.
func timedOut(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// readUntilClose reads what the server sends until it closes the
// connection (with or without close_notify) or max bytes have come.
func readUntilClose(c net.Conn, max int64, firstByte *time.Duration, start time.Time) ([]byte, error) {
	var out []byte
	buf := make([]byte, 16<<10)
	for int64(len(out)) < max {
		n, err := c.Read(buf[:min(int64(len(buf)), max-int64(len(out)))])
		if n > 0 && len(out) == 0 {
			*firstByte = time.Since(start)
		}
		out = append(out, buf[:n]...)
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
			return out, nil
		default:
			return out, fmt.Errorf("reading the answer: %w", err)
		}
	}
	return out, nil
}

// flagNames are the probe's words for what a hint names.
var flagNames = tlcphint.Names{Profile: func(p string) string { return "--profile " + p }, Cert: "--cert", EncCert: "--enc-cert"}

// describeHandshakeError explains a failed handshake that saw facts: what
// the server refused may be an extension of the ClientHello (SNI, ALPN,
// which GmSSL 3.1 servers refuse) or, once it asked for one, the client
// certificate or the profile's form of it; a certificate for another name
// may be a site's default, served because no SNI asked for the name.
func (p *prober) describeHandshakeError(err error, facts tlcphint.Facts) error {
	hint := tlcphint.Hint(err, facts, flagNames)
	var ae *tlcp.AlertError
	// Only the ClientHello carries extensions.
	refused := !facts.ServerCertificates && (errors.As(err, &ae) && ae.Remote || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
	unrecognized := errors.As(err, &ae) && ae.Remote && ae.Alert == tlcp.AlertUnrecognizedName
	var wrongName smx509.HostnameError
	err = describeHandshakeFailure(err, facts.ServerCertificates)
	sni := p.cfg.SendServerName
	switch {
	case unrecognized && sni:
		err = fmt.Errorf("%w: the server serves no site named %s; check the URL's host or --sni", err, p.cfg.ServerName)
	case unrecognized:
		err = fmt.Errorf("%w: the server has no default site and no SNI was sent (%s): give --sni NAME", err, p.o.sniReason(p.url.Hostname()))
	case errors.As(err, &wrongName) && !sni:
		err = fmt.Errorf("%w; no SNI was sent (%s), so a server with several sites answers with its default one: give --sni NAME to ask for a site", err, p.o.sniReason(p.url.Hostname()))
	case refused && sni && !errors.As(err, new(*tlcp.AlertError)):
		err = fmt.Errorf("%w; SNI %s was sent, which GmSSL 3.1 servers refuse: try --no-sni", err, p.cfg.ServerName)
	case refused && sni && (ae.Alert == tlcp.AlertHandshakeFailure || ae.Alert == tlcp.AlertDecodeError || ae.Alert == tlcp.AlertUnsupportedExtension || ae.Alert == tlcp.AlertIllegalParameter):
		err = fmt.Errorf("%w; SNI %s was sent, which GmSSL 3.1 servers refuse: try --no-sni", err, p.cfg.ServerName)
	}
	if len(p.cfg.NextProtos) > 0 && refused {
		err = fmt.Errorf("%w; --http2 offered ALPN, which GmSSL 3.1 servers refuse: try without it", err)
	}
	if hint != "" {
		err = fmt.Errorf("%w; %s", err, hint)
	}
	return err
}

// describeHandshakeFailure names an alert that says the port speaks
// another protocol, and a close without an alert; answered says that the
// server's certificates had arrived, so that it does speak TLCP.
func describeHandshakeFailure(err error, answered bool) error {
	var ae *tlcp.AlertError
	switch {
	case answered && !errors.As(err, &ae) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		return fmt.Errorf("the server closed the connection during the TLCP handshake without sending an alert, after it sent its certificates (%v)", err)
	case errors.As(err, &ae) && ae.Remote && ae.Alert == tlcp.AlertProtocolVersion:
		return fmt.Errorf("%w (the server does not speak TLCP on this port)", err)
	case errors.As(err, &ae):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("the server closed the connection during the TLCP handshake without sending an alert: it may not speak TLCP on this port (a TLS or plain TCP service, or a filter that drops the connection) (%v)", err)
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
	writeCertificates(w, st.PeerCertificates, st.VerifiedChains, verified, func(i int, c *smx509.Certificate) string {
		switch {
		case i == 0:
			return "sign"
		case i == 1 && c.KeyUsage&smx509.KeyUsageDigitalSignature == 0:
			return "enc"
		}
		return "chain"
	})
}

// writeCertificates describes the server's certificates, each with the
// role that role gives it, and whether they were verified.
func writeCertificates(w io.Writer, peer []*smx509.Certificate, chains [][]*smx509.Certificate, verified bool, role func(int, *smx509.Certificate) string) {
	for i, c := range peer {
		role := role(i, c)
		sum := sha256.Sum256(c.Raw)
		fmt.Fprintf(w, "* certificate %d (%s): subject %q\n", i, role, c.Subject.String())
		fmt.Fprintf(w, "*   issuer %q, serial %s\n", c.Issuer.String(), strings.ToUpper(c.SerialNumber.Text(16)))
		fmt.Fprintf(w, "*   valid %s to %s", c.NotBefore.UTC().Format(time.DateOnly), c.NotAfter.UTC().Format(time.DateOnly))
		if len(c.DNSNames) > 0 || len(c.IPAddresses) > 0 {
			names := make([]string, 0, len(c.DNSNames)+len(c.IPAddresses))
			for _, n := range c.DNSNames {
				names = append(names, printable(n))
			}
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
	case len(chains) > 0:
		chain := chains[0]
		fmt.Fprintf(w, "* server certificate verified up to %q\n", chain[len(chain)-1].Subject.String())
	}
}

// printable returns s as it is when every byte is printable ASCII, and
// quoted otherwise: a certificate's names and a status line come from the
// server, and a control character in them must not reach the terminal as
// a command.
func printable(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
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

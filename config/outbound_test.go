package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/tlcp"
)

func TestOutboundDefaults(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: partner}]}
  - {name: stream, listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tlcp://api.partner.cn:443", "tlcp://10.1.0.7"]
    tlcp: {ca: ca.crt}
  plain: {targets: ["tlcp://api.partner.cn:443"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams["partner"]
	if u.Scheme() != "tlcp" || cfg.Listeners[1].Protocol != ProtocolTCP {
		t.Fatalf("scheme %q, protocol %q", u.Scheme(), cfg.Listeners[1].Protocol)
	}
	tc := u.TLCP
	// The ECC suites (no encryption pair for ECDHE), in this CPU's
	// preferred order: GCM first where it is constant-time and fast, CBC
	// first elsewhere.
	first, second := "ECC_SM4_GCM_SM3", "ECC_SM4_CBC_SM3"
	if tlcp.DefaultCipherSuites[0] == tlcp.ECC_SM4_CBC_SM3 {
		first, second = second, first
	}
	if tc.Profile != tlcp.ProfileStandard || !tc.SuitesDefaulted || len(tc.Suites) != 2 ||
		tc.Suites[0] != first || tc.Suites[1] != second ||
		*tc.SessionCache.Size != DefaultUpstreamSessions || tc.SessionCache.Lifetime.D() != tlcp.DefaultSessionLifetime {
		t.Errorf("tlcp defaults: %+v %+v", tc, tc.SessionCache)
	}
	if cfg.Upstreams["plain"].TLCP != nil {
		t.Error("a tlcp section was made up for an upstream without one")
	}
	showParses(t, cfg)
}

// Every problem of an upstream's tlcp block and of tcp listeners is
// reported at once, each at its own line.
func TestOutboundProblems(t *testing.T) {
	yml := `listeners:
  - name: app
    listen: "0.0.0.0:8080"
    protocol: http
    routes: [{upstream: raw}]
  - name: stream
    listen: "127.0.0.1:9000"
    protocol: tcp
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}
    session_headers: {suite: X-Suite}
    routes: [{host: api.partner.cn, path: /v1, upstream: web}]
upstreams:
  raw: {targets: ["tcp://10.0.0.1:5432"]}
  web: {targets: ["http://10.0.0.2"]}
  partner:
    targets: ["tlcp://api.partner.cn:443", "https://api.partner.cn"]
    tlcp:
      ca: "-----BEGIN CERTIFICATE-----"
      server_name: "not a name"
      sign_cert: client.sign.crt
      enc_key: "file:/k?password=hunter2"
      suites: [ECC_SM4_GCM_SM3, RC4]
      profile: tongsuo
      session_cache: {size: -1}
  other:
    targets: ["https://10.0.0.3"]
    tlcp: {profile: gmssl}
  ecdhe:
    targets: ["tlcp://10.0.0.4:443"]
    tlcp: {suites: [ECDHE_SM4_CBC_SM3]}
`
	_, err := Parse("x.yaml", []byte(yml))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	want := []struct {
		line int
		text string
	}{
		{5, "listeners[0].routes[0].upstream: an http listener forwards HTTP requests, and tcp:// targets take whole connections"},
		{9, "listeners[1].tlcp: a tcp listener does not use a tlcp section"},
		{10, "listeners[1].session_headers: a tcp listener sends no HTTP headers"},
		{11, "listeners[1].routes[0].upstream: a tcp listener forwards whole connections, which http:// targets do not take"},
		{16, `upstreams.partner.targets[1]: a https:// target in a pool of tlcp:// targets`},
		{18, "upstreams.partner.tlcp.ca: PEM data written inline"},
		{19, `upstreams.partner.tlcp.server_name: "not a name" is not a host name or IP address`},
		{20, "upstreams.partner.tlcp.sign_cert: the signing certificate has no key: sign_key is not set"},
		{21, "upstreams.partner.tlcp.enc_key: the encryption key has no certificate: enc_cert is not set"},
		{21, "upstreams.partner.tlcp.enc_key: the password is written in the configuration"},
		{22, `upstreams.partner.tlcp.suites[1]: unknown cipher suite "RC4"`},
		{23, `upstreams.partner.tlcp.profile: unknown profile "tongsuo"; use standard, gmssl or auto`},
		{24, "upstreams.partner.tlcp.session_cache.size: -1 is out of range"},
		{27, "upstreams.other.tlcp: tlcp settings apply to tlcp:// targets only"},
		{30, "upstreams.ecdhe.tlcp.suites[0]: ECDHE_SM4_CBC_SM3 needs the client's encryption certificate"},
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(ce.Problems), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		p := ce.Problems[i]
		if p.Line != w.line || !strings.Contains(p.String(), w.text) || p.Fix == "" {
			t.Errorf("problem %d = %q (line %d), want line %d with %q and a fix", i, p.String(), p.Line, w.line, w.text)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Error("the error repeats a secret")
	}
}

// A tcp listener's route to a tlcp:// upstream, and to a tcp:// one, is
// valid; its one route matches any host.
func TestTCPListenerRoutes(t *testing.T) {
	for _, target := range []string{"tlcp://10.0.0.1:443", "tcp://10.0.0.1:5432"} {
		_, err := Parse("x.yaml", []byte(`
listeners:
  - {listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: u}]}
upstreams: {u: {targets: ["`+target+`"]}}
`))
		if err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
}

// http2 is taken on a pool of tlcp:// targets (for its HTTP routes, and
// beside a tcp listener's route, which never offers ALPN), and refused,
// with a fix, on the schemes that have no choice to make.
func TestOutboundHTTP2(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: partner}]}
  - {name: stream, listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: partner}]}
upstreams:
  partner: {targets: ["tlcp://api.partner.cn:443"], http2: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Upstreams["partner"].HTTP2 {
		t.Fatal("http2 lost")
	}
	out, err := Show(cfg)
	if err != nil || !strings.Contains(string(out), "http2: true") {
		t.Fatalf("config show:\n%s\n%v", out, err)
	}
	_, err = Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: g}]}
  - {name: stream, listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: raw}]}
upstreams:
  g: {targets: ["h2c://10.0.0.6:50051"], http2: true}
  raw: {targets: ["tcp://10.0.0.7:5432"], http2: true}
`))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("err = %v", err)
	}
	for i, want := range []struct {
		line      int
		text, fix string
	}{
		{6, "upstreams.g.http2: http2 applies to https:// and tlcp:// targets", "h2c:// targets always speak HTTP/2"},
		{7, "upstreams.raw.http2: http2 applies to https:// and tlcp:// targets", "remove http2"},
	} {
		p := ce.Problems[i]
		if p.Line != want.line || !strings.Contains(p.String(), want.text) || !strings.Contains(p.Fix, want.fix) {
			t.Errorf("problem %d = %q (line %d, fix %q), want line %d with %q, fix %q", i, p.String(), p.Line, p.Fix, want.line, want.text, want.fix)
		}
	}
}

// The client-mode example of docs/config.md is a valid configuration.
func TestClientModeDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Client mode")
	if !ok {
		t.Fatal("docs/config.md has no client mode section")
	}
	_, block, ok := strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the client mode section has no yaml example")
	}
	cfg, err := Parse("config.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	api, db := cfg.Upstreams["partner-api"], cfg.Upstreams["partner-db"]
	if api.Scheme() != "tlcp" || api.Host != UpstreamHostTarget || db.TLCP == nil || db.TLCP.SignCert != api.TLCP.SignCert || cfg.Listeners[1].Protocol != ProtocolTCP {
		t.Errorf("the example does not say what the section explains: %+v %+v", api, db)
	}
}

// An upstream's host is taken on every scheme that speaks HTTP, and a
// value that is not host[:port] or "target", or a host on tcp:// targets,
// is refused at its line with a fix.
func TestUpstreamHost(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner: {targets: ["tlcp://api.partner.cn"], host: target}
  web: {targets: ["http://10.0.0.2:8080"], host: "api.example.cn:8443"}
  v6: {targets: ["https://10.0.0.3"], host: "[2001:db8::1]"}
  grpc: {targets: ["h2c://10.0.0.4:50051"], host: "10.0.0.4"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Upstreams["partner"].Host; h != UpstreamHostTarget {
		t.Fatalf("host %q", h)
	}
	out, err := Show(cfg)
	if err != nil || !strings.Contains(string(out), "host: target") || !strings.Contains(string(out), "host: api.example.cn:8443") {
		t.Fatalf("config show:\n%s\n%v", out, err)
	}

	_, err = Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: a}]}
  - {name: stream, listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: raw}]}
upstreams:
  a: {targets: ["http://10.0.0.2"], host: "api.example.cn/v1"}
  b: {targets: ["http://10.0.0.2"], host: "::1"}
  c: {targets: ["tlcp://10.0.0.2"], host: "api.example.cn:0"}
  d: {targets: ["tlcp://10.0.0.2"], host: "*.example.cn"}
  raw: {targets: ["tcp://10.0.0.7:5432"], host: target}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	want := []struct {
		line      int
		text, fix string
	}{
		{6, `upstreams.a.host: "api.example.cn/v1" is not a host name or IP address with an optional port`, `write "target"`},
		{7, `upstreams.b.host: "::1" is not a host name`, "in brackets"},
		{8, `upstreams.c.host: "api.example.cn:0" is not a host name`, "api.partner.cn:8443"},
		{9, `upstreams.d.host: "*.example.cn" is not a host name`, `write "target"`},
		{10, "upstreams.raw.host: tcp:// targets take whole connections and get no Host header", "remove host"},
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(ce.Problems), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		p := ce.Problems[i]
		if p.File != "x.yaml" || p.Line != w.line || !strings.Contains(p.String(), w.text) || !strings.Contains(p.Fix, w.fix) {
			t.Errorf("problem %d = %q (line %d, fix %q), want line %d with %q, fix %q", i, p.String(), p.Line, p.Fix, w.line, w.text, w.fix)
		}
	}
}

package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/tlcp/tls13"
)

// A tls13sm:// upstream gets its client defaults even without a section,
// carries a tcp listener's connections, and shows and parses again.
func TestTLS13SMDefaults(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(`
listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: partner}]}
  - {name: stream, listen: "127.0.0.1:9000", protocol: tcp, routes: [{upstream: bare}]}
upstreams:
  partner:
    targets: ["tls13sm://api.partner.cn:443", "tls13sm://10.1.0.7"]
    tls13sm: {ca: ca.crt, sign_cert: c.crt, sign_key: "file:c.key"}
  bare: {targets: ["tls13sm://api.partner.cn:8443"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"partner", "bare"} {
		u := cfg.Upstreams[name]
		tc := u.TLS13SM
		if u.Scheme() != SchemeTLS13SM || tc == nil {
			t.Fatalf("%s: scheme %q, section %+v", name, u.Scheme(), tc)
		}
		if strings.Join(tc.Suites, ",") != "TLS_SM4_GCM_SM3,TLS_SM4_CCM_SM3" || strings.Join(tc.Groups, ",") != "curveSM2MLKEM768,curveSM2" ||
			*tc.SessionCache.Size != DefaultUpstreamSessions || tc.SessionCache.Lifetime.D() != tls13.DefaultSessionLifetime {
			t.Errorf("%s: defaults %+v %+v", name, tc, tc.SessionCache)
		}
	}
	if !cfg.Upstreams["partner"].TLS13SM.HasIdentity() || cfg.Upstreams["bare"].TLS13SM.HasIdentity() {
		t.Error("HasIdentity is wrong")
	}
	if cfg.Upstreams["partner"].TLCP != nil {
		t.Error("a tlcp section was made up for a tls13sm:// upstream")
	}
	showParses(t, cfg)
}

// Every problem of a tls13sm section is reported at once, at its line.
func TestTLS13SMProblems(t *testing.T) {
	yml := `listeners:
  - {name: app, listen: "127.0.0.1:8080", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tls13sm://api.partner.cn:443"]
    http2: true
    tls13sm:
      ca: "-----BEGIN CERTIFICATE-----"
      server_name: "not a name"
      sign_cert: client.crt
      suites: [TLS_SM4_GCM_SM3, ECC_SM4_GCM_SM3, TLS_SM4_GCM_SM3]
      groups: [curveSM2, x25519, curveSM2]
      session_cache: {size: -1}
  keyonly:
    targets: ["tls13sm://10.0.0.4:443"]
    tls13sm: {sign_key: "file:/k?password=hunter2"}
  other:
    targets: ["tlcp://10.0.0.3"]
    tls13sm: {groups: [curveSM2]}
  blind:
    targets: ["tls13sm://10.0.0.5:443"]
    tls13sm: {insecure_skip_verify: true, revocation: {ocsp: aia, policy: strict}}
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
		{6, "upstreams.partner.http2: http2 applies to https:// and tlcp:// targets"},
		{8, "upstreams.partner.tls13sm.ca: PEM data written inline"},
		{9, `upstreams.partner.tls13sm.server_name: "not a name" is not a host name or IP address`},
		{10, "upstreams.partner.tls13sm.sign_cert: the client certificate has no key: sign_key is not set"},
		{11, `upstreams.partner.tls13sm.suites[1]: unknown TLS 1.3 ShangMi cipher suite "ECC_SM4_GCM_SM3"; use TLS_SM4_GCM_SM3 or TLS_SM4_CCM_SM3 (ECC_SM4_GCM_SM3 is a TLCP suite`},
		{11, "upstreams.partner.tls13sm.suites[2]: TLS_SM4_GCM_SM3 is listed twice"},
		{12, `upstreams.partner.tls13sm.groups[1]: unknown group "x25519"`},
		{12, "upstreams.partner.tls13sm.groups[2]: curveSM2 is listed twice"},
		{13, "upstreams.partner.tls13sm.session_cache.size: -1 is out of range"},
		{16, "upstreams.keyonly.tls13sm.sign_key: the client key has no certificate: sign_cert is not set"},
		{16, "upstreams.keyonly.tls13sm.sign_key: the password is written in the configuration"},
		{19, "upstreams.other.tls13sm: tls13sm settings apply to tls13sm:// targets only"},
		{22, "upstreams.blind.tls13sm.revocation: insecure_skip_verify verifies no target certificate"},
		{22, `upstreams.blind.tls13sm.revocation.policy: unknown policy "strict"`},
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

package config

import (
	"errors"
	"strings"
	"testing"
)

// A tls section may hold an SM2 identity beside its certificate, or alone;
// its ShangMi settings get the defaults of the tlcp section's.
func TestTLSSM2Section(t *testing.T) {
	cfg, err := Parse("/etc/gmgate/x.yaml", []byte(`
listeners:
  - name: edge
    listen: "127.0.0.1:8443"
    protocol: tls
    sites:
      - name: both
        hosts: [www.example.cn]
        tls:
          cert: rsa.crt
          key: rsa.key
          client_auth: verify_if_given
          client_ca: rsa-ca.crt
          sm2: {cert: sm2.crt, key: "file:sm2.key", client_ca: sm2-ca.crt}
        routes: [{upstream: app}]
      - name: gm-only
        hosts: [gm.example.cn]
        tls:
          sm2: {cert: gm.crt, key: gm.key, tls13_shangmi: accept, tls13_groups: [curveSM2]}
        routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:9"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	both, gm := cfg.Listeners[0].Sites[0].TLS, cfg.Listeners[0].Sites[1].TLS
	if !both.HasStandard() || gm.HasStandard() {
		t.Errorf("HasStandard: %t %t", both.HasStandard(), gm.HasStandard())
	}
	if s := both.SM2; s.Cert != "sm2.crt" || s.Key != "file:sm2.key" || s.ClientCA != "sm2-ca.crt" ||
		s.TLS13ShangMi != TLS13ShangMiPrefer || strings.Join(s.TLS13Groups, ",") != "curveSM2MLKEM768,curveSM2" {
		t.Errorf("sm2 with defaults: %+v", s)
	}
	if s := gm.SM2; s.TLS13ShangMi != TLS13ShangMiAccept || strings.Join(s.TLS13Groups, ",") != "curveSM2" || !s.Serves() {
		t.Errorf("sm2 as written: %+v", s)
	}
	showParses(t, cfg)
}

// Every problem of an SM2 identity is reported at its line with a fix.
func TestTLSSM2Problems(t *testing.T) {
	yml := `listeners:
  - name: edge
    listen: "127.0.0.1:8443"
    protocol: tls
    tls:
      client_auth: require_and_verify
      client_ca: clients.crt
      sm2:
        cert: "-----BEGIN CERTIFICATE-----"
        tls13_shangmi: always
        tls13_groups: [x25519]
    routes: [{upstream: app}]
  - name: gm
    listen: "127.0.0.1:8444"
    protocol: auto
    tlcp: {sign_cert: s.crt, sign_key: s.key, enc_cert: e.crt, enc_key: e.key, tls13_shangmi: prefer}
    tls:
      sm2: {cert: sm2.crt, key: sm2.key}
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:9"]}
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
		{7, "listeners[0].tls.client_ca: client_ca verifies the client certificates of crypto/tls clients, and this tls section has no cert"},
		{8, "listeners[0].tls.sm2.client_ca: client_auth: require_and_verify verifies the client certificates of TLS 1.3 ShangMi clients too"},
		{9, "listeners[0].tls.sm2.cert: PEM data written inline"},
		{8, "listeners[0].tls.sm2.key: "},
		{10, `listeners[0].tls.sm2.tls13_shangmi: unknown tls13_shangmi "always"`},
		{11, `listeners[0].tls.sm2.tls13_groups[0]: unknown TLS 1.3 ShangMi group "x25519"`},
		{16, "listeners[1].tlcp.tls13_shangmi: tls.sm2 answers this site's TLS 1.3 ShangMi clients instead of the tlcp signing pair"},
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(ce.Problems), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range ce.Problems {
			if p.Line == w.line && strings.Contains(p.String(), w.text) && p.Fix != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem at line %d with %q and a fix in:\n%s", w.line, w.text, strings.Join(got, "\n"))
		}
	}
}

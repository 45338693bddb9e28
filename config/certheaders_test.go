package config

import (
	"errors"
	"strings"
	"testing"
)

// The RFC 9440 session headers: client_cert_max_bytes defaults only
// where a certificate header is named, and mistakes are problems at
// their line.
func TestClientCertHeaderSettings(t *testing.T) {
	const base = `listeners:
  - listen: ":1"
    tls: {cert: c, key: k, client_auth: verify_if_given, client_ca: ca}
    routes: [{upstream: u}]
    session_headers:
      client_issuer: X-Client-Issuer
`
	const up = "upstreams: {u: {targets: [\"http://h:1\"]}}\n"
	cfg, err := Parse("x.yaml", []byte(base+up))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Listeners[0].SessionHeaders; h.ClientCertMaxBytes != 0 || h.ClientVerified != DefaultClientVerifiedHeader {
		t.Errorf("without certificate headers: %+v", h)
	}
	cfg, err = Parse("x.yaml", []byte(base+"      client_cert: Client-Cert\n"+up))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Listeners[0].SessionHeaders.ClientCertMaxBytes; got != DefaultClientCertMaxBytes {
		t.Errorf("client_cert_max_bytes %d, want %d", got, DefaultClientCertMaxBytes)
	}

	_, err = Parse("x.yaml", []byte(base+`      client_cert: Client-Cert
      client_cert_chain: client-cert
      client_enc_cert: "Enc Cert"
      client_cert_max_bytes: 100
`+up))
	want := []string{
		`x.yaml:8: listeners[0].session_headers.client_cert_chain: "client-cert" is also the name of client_cert`,
		`x.yaml:9: listeners[0].session_headers.client_enc_cert: "Enc Cert" is not a valid header name`,
		`x.yaml:10: listeners[0].session_headers.client_cert_max_bytes: 100 bytes cannot hold a certificate`,
	}
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v", err)
	}
	var got []string
	for _, p := range cerr.Problems {
		got = append(got, p.String())
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no problem %q in\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// ocsp_stapling is on by default on both sides, and a value that is not
// a boolean is a problem at its line.
func TestOCSPStaplingSetting(t *testing.T) {
	const doc = `listeners:
  - listen: ":1"
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}
    tls: {cert: c, key: k, ocsp_stapling: false}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`
	cfg, err := Parse("x.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Listeners[0]; !l.TLCP.Staples() || l.TLS.Staples() {
		t.Errorf("tlcp staples %v (want true), tls staples %v (want false)", l.TLCP.Staples(), l.TLS.Staples())
	}
	_, err = Parse("x.yaml", []byte(strings.Replace(doc, "ocsp_stapling: false", "ocsp_stapling: sometimes", 1)))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || !strings.HasPrefix(cerr.Problems[0].String(), "x.yaml:4: listeners[0].tls.ocsp_stapling:") {
		t.Errorf("got %v", err)
	}
}

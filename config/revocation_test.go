package config

import (
	"strings"
	"testing"
	"time"
)

// client_revocation and an upstream's revocation take their defaults
// when present, and each mistake is one problem at its line, with a fix,
// never repeating a URL's user information.
func TestRevocationKeys(t *testing.T) {
	const good = `listeners:
  - listen: ":1"
    tlcp:
      sign_cert: c
      sign_key: k
      enc_cert: c
      enc_key: k
      client_auth: require_and_verify
      client_ca: ca.crt
      client_revocation:
        crl: [ca/crl.pem, "http://ca.example.cn/clients.crl"]
    routes: [{upstream: u}]
upstreams:
  u:
    targets: ["https://h:1"]
    tls: {revocation: {ocsp: aia, policy: fail_open, grace: 0s}}
`
	cfg, err := Parse("x.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Listeners[0].TLCP.ClientRevocation
	if r.OCSP != RevocationOCSPOff || r.Refresh.D() != time.Hour || r.Grace.D() != time.Hour || r.Policy != RevocationFailClosed || len(r.CRL) != 2 {
		t.Errorf("site defaults: %+v", r)
	}
	ur := cfg.Upstreams["u"].TLS.Revocation
	if ur.OCSP != RevocationOCSPAIA || ur.Grace.D() != 0 || ur.Policy != RevocationFailOpen || ur.OCSPResponder() != "" {
		t.Errorf("upstream values: %+v", ur)
	}

	const bad = `listeners:
  - listen: ":1"
    tlcp:
      sign_cert: c
      sign_key: k
      enc_cert: c
      enc_key: k
      client_auth: require
      client_revocation:
        crl:
          - ca/crl.pem
          - "ftp://user:secret@ca.example.cn/x.crl"
          - ca/crl.pem
          - ""
        ocsp: sometimes
        refresh: 200h
        grace: -1s
        policy: lenient
    tls:
      cert: c
      key: k
      client_auth: require_and_verify
      client_ca: ca.crt
      client_revocation: {}
    routes: [{upstream: u}]
upstreams:
  u:
    targets: ["tlcp://h:1"]
    tlcp: {insecure_skip_verify: true, revocation: {ocsp: "http://"}}
`
	err = wantProblems(t, bad, []string{
		`x.yaml:9: listeners[0].tlcp.client_revocation: client_auth require verifies no client certificate`,
		`x.yaml:12: listeners[0].tlcp.client_revocation.crl[1]: the scheme "ftp" is not http or https`,
		`x.yaml:13: listeners[0].tlcp.client_revocation.crl[2]: the same source as crl[0]`,
		`x.yaml:14: listeners[0].tlcp.client_revocation.crl[3]: an empty CRL source`,
		`x.yaml:15: listeners[0].tlcp.client_revocation.ocsp: unknown value "sometimes"`,
		`x.yaml:16: listeners[0].tlcp.client_revocation.refresh: 200h0m0s is out of range`,
		`x.yaml:17: listeners[0].tlcp.client_revocation.grace: -1s is out of range`,
		`x.yaml:18: listeners[0].tlcp.client_revocation.policy: unknown policy "lenient"`,
		`x.yaml:24: listeners[0].tls.client_revocation: neither crl nor ocsp is set`,
		`x.yaml:29: upstreams.u.tlcp.revocation: insecure_skip_verify verifies no target certificate`,
		`x.yaml:29: upstreams.u.tlcp.revocation.ocsp: the URL names no host`,
	})
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("a URL's password reached a problem:\n%v", err)
	}
}

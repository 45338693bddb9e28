package main

import (
	"crypto"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// An upstream's revocation section refuses https://, tlcp:// and
// tls13sm:// targets whose certificate its CA revoked: the request gets a
// 502, and the target next to it, whose certificate is good, answers.
func TestServeUpstreamRevocation(t *testing.T) {
	f := newRevokeFixture(t)
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "tls-ca", "tls-ca-certs/alice.example.cn.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "tls-ca")
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "sm2-ca", "sm2-ca-certs/alice.example.cn.sign.crt", "sm2-ca-certs/alice.example.cn.enc.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "sm2-ca")

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "target") })
	targets := map[string]string{}
	for _, who := range []string{"alice", "bob"} {
		base := f.path("tls-ca-certs/" + who + ".example.cn")
		cert, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(hello)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		targets[who+"-https"] = srv.URL

		base = f.path("sm2-ca-certs/" + who + ".example.cn")
		dual, err := tlcp.LoadX509KeyPair(base+".sign.crt", base+".sign.key", base+".enc.crt", base+".enc.key")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{dual}})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: hello}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		targets[who+"-tlcp"] = "tlcp://" + ln.Addr().String()

		// A TLS 1.3 ShangMi server presents the signing pair alone.
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sm := &http.Server{Handler: hello}
		go sm.Serve(tls13.NewListener(raw, &tls13.Config{Certificates: []tls13.Certificate{{
			Certificate: dual.SignCertificate, PrivateKey: dual.SignKey.(crypto.Signer)}}}))
		t.Cleanup(func() { sm.Close() })
		targets[who+"-tls13sm"] = "tls13sm://" + raw.Addr().String()
	}
	ups := ""
	for _, who := range []string{"alice", "bob"} {
		ups += fmt.Sprintf(`  %[1]s-https:
    targets: [%[2]q]
    health: {disabled: true}
    tls: {ca: tls-ca/ca.crt, server_name: %[1]s.example.cn, revocation: {crl: [tls-ca/crl.pem]}}
  %[1]s-tlcp:
    targets: [%[3]q]
    health: {disabled: true}
    tlcp: {ca: sm2-ca/ca.crt, server_name: %[1]s.example.cn, revocation: {crl: [sm2-ca/crl.pem]}}
  %[1]s-tls13sm:
    targets: [%[4]q]
    health: {disabled: true}
    tls13sm: {ca: sm2-ca/ca.crt, server_name: %[1]s.example.cn, revocation: {crl: [sm2-ca/crl.pem]}}
`, who, targets[who+"-https"], targets[who+"-tlcp"], targets[who+"-tls13sm"])
	}
	cfg := `  - name: front
    listen: "127.0.0.1:0"
    protocol: http
    routes:
      - {path: /alice-https, upstream: alice-https}
      - {path: /bob-https, upstream: bob-https}
      - {path: /alice-tlcp, upstream: alice-tlcp}
      - {path: /bob-tlcp, upstream: bob-tlcp}
      - {path: /alice-tls13sm, upstream: alice-tls13sm}
      - {path: /bob-tls13sm, upstream: bob-tls13sm}
`
	srv := f.serveUpstreams(t, cfg, ups, "front")
	for path, want := range map[string]int{"/alice-https": 502, "/bob-https": 200, "/alice-tlcp": 502, "/bob-tlcp": 200, "/alice-tls13sm": 502, "/bob-tls13sm": 200} {
		resp, err := http.Get("http://" + srv.addrs["front"] + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	for _, up := range []string{"alice-https", "alice-tlcp", "alice-tls13sm"} {
		if n := metricSum(t, srv.admin, "gmgate_revocation_refused_total", `scope="upstreams.`+up+`"`, `status="revoked"`); n < 1 {
			t.Errorf("%s: no refusal counted", up)
		}
	}
	for _, up := range []string{"alice-tlcp", "alice-tls13sm"} {
		if n := metricSum(t, srv.admin, "gmgate_upstream_failures_total", `upstream="`+up+`"`, `reason="alert_sent_revoked_certificate"`); n < 1 {
			t.Errorf("%s: no handshake failure with the alert revoked_certificate counted", up)
		}
	}
}

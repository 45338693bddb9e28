//go:build cgo

package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// A tls13sm:// upstream's client key on a crypto card: the card signs the
// CertificateVerify of each full handshake to the partner, which sees the
// card's certificate.
func TestServeTLS13SMUpstreamCardKey(t *testing.T) {
	s := newCardSetup(t)
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der := s.ca.Issue(t, testpki.Template("partner", []string{"localhost"}, false), &key.PublicKey)
	clientCAs := smx509.NewCertPool()
	clientCAs.AddCert(s.ca.Cert)
	partner := startTLS13SMPartner(t, tls13.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, clientCAs)

	file := filepath.Join(s.dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tls13sm://%s"]
    health: {disabled: true}
    tls13sm:
      ca: %s
      server_name: localhost
      sign_cert: %s
      sign_key: %q
      session_cache: {size: 0}
`, partner.api, s.caFile, s.signCert, s.ref("sign", s.card.PINFile))), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := s.command("config", "check", "-c", file).CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	gw := startServe(t, s.command("serve", "-c", file), "app")
	before := cardOps(t, gw.admin, "sign", "ok")
	client := &http.Client{Timeout: 20 * time.Second}
	const n = 2
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("http://%s/card/%d", gw.addrs["app"], i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("GET /card/%d for localhost suite=TLS_SM4_GCM_SM3 group=curveSM2MLKEM768 resumed=false", i)
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
	}
	if signs := cardOps(t, gw.admin, "sign", "ok") - before; signs != n {
		t.Errorf("the card made %v signatures for %d full handshakes", signs, n)
	}
}

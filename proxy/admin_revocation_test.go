package proxy

import (
	"crypto/rand"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/config"
)

// The admin API's revocation view lists a site's client checks and an
// upstream's target checks by scope, each with its policy and sources.
func TestAdminRevocationScopes(t *testing.T) {
	p := getPKI(t)
	now := time.Now()
	der, err := smx509.CreateRevocationList(rand.Reader, &smx509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour),
	}, p.ca.Root, p.ca.RootKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, crlFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.crl")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crlFile, der, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(p, "https://127.0.0.1:1")
	tc := cfg.Listeners[0].TLCP
	tc.ClientAuth, tc.ClientCA = "require_and_verify", caFile
	tc.ClientRevocation = &config.Revocation{CRL: []string{crlFile}}
	cfg.Upstreams["app"].TLS = &config.UpstreamTLS{Revocation: &config.Revocation{OCSP: "aia", Policy: "fail_open"}}
	config.Defaults(cfg)
	s := startServer(t, cfg, nil)

	scopes := adminState{s}.Revocation()
	if len(scopes) != 2 {
		t.Fatalf("scopes: %+v", scopes)
	}
	site, up := scopes[0], scopes[1]
	if site.Scope != "edge/tlcp" || site.Checks != "client" || site.Policy != "fail_closed" || len(site.Sources) != 1 {
		t.Fatalf("site scope: %+v", site)
	}
	if src := site.Sources[0]; src.Kind != "crl" || src.Source != crlFile || src.State != "ok" || !src.NextUpdate.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("site's CRL: %+v", src)
	}
	if up.Scope != "upstreams.app" || up.Checks != "upstream" || up.Policy != "fail_open" || len(up.Sources) != 1 || up.Sources[0].Kind != "ocsp" || up.Sources[0].State != "not_asked" {
		t.Errorf("upstream scope: %+v", up)
	}
}

package proxy

import (
	"crypto/rand"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/config"
)

// A site's revocation checker lives with the generation: a reload that
// leaves its settings alone keeps it (and reads its CRLs again), one that
// changes them replaces it and stops the old one, and a reload without
// it, or the shutdown, stops it. TestMain's leak check finds a Run left
// behind.
func TestRevocationCheckerFollowsReloads(t *testing.T) {
	p := getPKI(t)
	now := time.Now()
	crl, err := smx509.CreateRevocationList(rand.Reader, &smx509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour),
	}, p.ca.Root, p.ca.RootKey)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	crlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write(crl)
	}))
	defer crlSrv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	withRevocation := func(refresh time.Duration) *config.Config {
		cfg := testConfig(p, "http://127.0.0.1:1")
		tc := cfg.Listeners[0].TLCP
		tc.ClientAuth, tc.ClientCA = "require_and_verify", caFile
		tc.ClientRevocation = &config.Revocation{CRL: []string{crlSrv.URL}, Refresh: config.Duration(refresh)}
		config.Defaults(cfg)
		return cfg
	}
	s := startServer(t, withRevocation(time.Hour), nil)
	run := func() *revocationRun { return s.current().revocation.runs["edge/tlcp"] }
	first := run()
	if first == nil || first.cancel == nil {
		t.Fatal("no running checker for the site")
	}
	if n := fetches.Load(); n < 1 {
		t.Fatalf("the CRL was not read before serving: %d fetches", n)
	}

	// Same settings: kept, and its CRL read again.
	before := fetches.Load()
	if err := s.Reload(withRevocation(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if run() != first {
		t.Error("a reload with the same settings replaced the checker")
	}
	if fetches.Load() <= before {
		t.Error("the reload did not read the CRL again")
	}

	// Other settings: replaced, the old one stopped.
	if err := s.Reload(withRevocation(2 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := run()
	if second == first || second == nil {
		t.Fatal("a reload with other settings kept the checker")
	}
	select {
	case <-first.done:
	default:
		t.Error("the replaced checker still runs")
	}

	// Without revocation: stopped.
	if err := s.Reload(testConfig(p, "http://127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	if run() != nil {
		t.Error("a checker without client_revocation")
	}
	select {
	case <-second.done:
	default:
		t.Error("the checker of the removed section still runs")
	}
}

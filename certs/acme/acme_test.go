package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gmgate/gmgate/internal/testacme"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
)

const acmeTestDomain = "acme.gmgate.test"

// pebbleHTTP01 starts Pebble, validating HTTP-01 challenges on a loopback
// port that the test serves (as the proxy's port-80 listener would) on the
// returned listener, and returns the ACME options for it.
func pebbleHTTP01(t *testing.T) (*testacme.Pebble, net.Listener, Options) {
	t.Helper()
	return pebbleHTTP01With(t, testacme.New(t))
}

func pebbleHTTP01With(t *testing.T, pebble *testacme.Pebble) (*testacme.Pebble, net.Listener, Options) {
	t.Helper()
	challengeLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpPort := challengeLn.Addr().(*net.TCPAddr).Port
	pebble.Start(httpPort, 0)
	return pebble, challengeLn, Options{
		Domains:                 []string{acmeTestDomain},
		DirectoryURL:            pebble.DirectoryURL,
		TrustedRoots:            pebble.ServerRoots,
		HTTPPort:                httpPort,
		ListenHost:              "127.0.0.1",
		DisableTLSALPNChallenge: true,
		Logger:                  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// serveHTTP01 answers a's HTTP-01 challenges on ln until the test ends.
func serveHTTP01(t *testing.T, a *Manager, ln net.Listener) {
	srv := &http.Server{Handler: a.HTTPChallengeHandler(http.NotFoundHandler()), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func TestACMEWithPebble(t *testing.T) {
	pebble, challengeLn, opts := pebbleHTTP01(t)
	opts.StateDir = t.TempDir()
	acme, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acme.Stop)
	serveHTTP01(t, acme, challengeLn)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := acme.Manage(ctx); err != nil {
		t.Fatalf("ACME issuance: %v", err)
	}

	// Serve the TLS side from a Store whose TLS certificates come from
	// ACME, and connect with crypto/tls trusting Pebble's root.
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dual, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{acmeTestDomain}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := dual.Write(dir, "site", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := certs.NewStore(certs.StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLSFallback: acme.GetCertificate},
		certs.Source{Name: "edge", TLCP: &certs.TLCPFiles{SignCert: pair.SignCert, SignKey: pair.SignKey, EncCert: pair.EncCert, EncKey: pair.EncKey}})
	if err != nil {
		t.Fatal(err)
	}
	tcfg := &tls.Config{GetCertificate: s.GetTLSCertificate}
	addr := testnet.Serve(t, func(c net.Conn) { tls.Server(c, tcfg).Handshake() })
	pebbleRoots := pebble.IssuerRoots()
	// Pebble's chain is root <- intermediate <- leaf; the served chain
	// must carry the intermediate.
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pebbleRoots, ServerName: acmeTestDomain})
	if err != nil {
		t.Fatalf("TLS client did not accept the ACME certificate: %v", err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if leaf.DNSNames[0] != acmeTestDomain {
		t.Fatalf("served %v", leaf.DNSNames)
	}
	if leaf.Issuer.String() == leaf.Subject.String() {
		t.Fatal("served a self-signed certificate")
	}
}

// Renewals and failures reported by certmagic show in the metrics and the
// log, by kind.
func TestACMEIssuanceMetrics(t *testing.T) {
	var logs testlog.Buffer
	a, err := New(Options{Name: "edge", StateDir: t.TempDir(), Domains: []string{acmeTestDomain},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	ctx := context.Background()
	_ = a.onEvent(ctx, "cert_obtained", map[string]any{"identifier": acmeTestDomain, "renewal": false})
	_ = a.onEvent(ctx, "cert_obtained", map[string]any{"identifier": acmeTestDomain, "renewal": true})
	_ = a.onEvent(ctx, "cert_failed", map[string]any{"identifier": acmeTestDomain, "renewal": true, "error": "rate limited"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a)
	got, err := testutil.GatherAndCount(reg, "gmgate_acme_issuance_total")
	if err != nil || got != 4 {
		t.Fatalf("series: %d, %v", got, err)
	}
	want := `
# HELP gmgate_acme_issuance_total ACME certificate orders by certificate set, kind (new, renewal) and result (success, failure).
# TYPE gmgate_acme_issuance_total counter
gmgate_acme_issuance_total{kind="new",name="edge",result="failure"} 0
gmgate_acme_issuance_total{kind="new",name="edge",result="success"} 1
gmgate_acme_issuance_total{kind="renewal",name="edge",result="failure"} 1
gmgate_acme_issuance_total{kind="renewal",name="edge",result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gmgate_acme_issuance_total"); err != nil {
		t.Error(err)
	}
	for _, line := range []string{`"msg":"ACME certificate obtained","name":"edge","domain":"` + acmeTestDomain + `","kind":"renewal"`, `"cause":"rate limited"`} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %s:\n%s", line, logs.String())
		}
	}
}

// refusingIssuer fails every order with an error certmagic does not retry.
type refusingIssuer struct{ orders atomic.Int64 }

func (i *refusingIssuer) Issue(context.Context, *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	i.orders.Add(1)
	return nil, certmagic.ErrNoRetry{Err: errors.New("refused by the CA")}
}

func (i *refusingIssuer) IssuerKey() string { return "refusing" }

// An order certmagic gives up on is not made again every few seconds:
// the CA would only rate-limit the account.
func TestACMEKeepsCertmagicsNoRetry(t *testing.T) {
	var logs testlog.Buffer
	a, err := New(Options{StateDir: t.TempDir(), Domains: []string{acmeTestDomain}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	issuer := &refusingIssuer{}
	a.cfg.Issuers = []certmagic.Issuer{issuer}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// manage says it gave up and returns: no loop is left to order again.
	testwait.For(t, "ACME to give up", func() bool { return strings.Contains(logs.String(), "ACME gave up on the certificate") })
	if n := issuer.orders.Load(); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

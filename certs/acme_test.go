package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"github.com/gmgate/gmgate/internal/testnet"
)

const acmeTestDomain = "acme.gmgate.test"

// startLoopbackDNS answers every A query with 127.0.0.1 (and AAAA with
// nothing), so that Pebble's validation reaches the test's challenge
// server on loopback.
func startLoopbackDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

func TestACMEWithPebble(t *testing.T) {
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	quiet := log.New(io.Discard, "", 0)

	// The HTTP-01 challenge is served by this test on loopback, as the
	// proxy's port-80 listener would.
	challengeLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpPort := challengeLn.Addr().(*net.TCPAddr).Port

	store := db.NewMemoryStore()
	pebbleCA := ca.New(quiet, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	pebbleVA := va.New(quiet, httpPort, 0, false, startLoopbackDNS(t), store)
	front := wfe.New(quiet, store, pebbleVA, pebbleCA, []string{"pebble.letsencrypt.org"}, false, false, 3, 5)
	acmeServer := httptest.NewTLSServer(front.Handler())
	t.Cleanup(acmeServer.Close)
	acmeRoots := x509.NewCertPool()
	acmeRoots.AddCert(acmeServer.Certificate())

	stateDir := t.TempDir()
	acme, err := NewACME(ACMEOptions{
		StateDir:                stateDir,
		Domains:                 []string{acmeTestDomain},
		DirectoryURL:            acmeServer.URL + wfe.DirectoryPath,
		TrustedRoots:            acmeRoots,
		HTTPPort:                httpPort,
		ListenHost:              "127.0.0.1",
		DisableTLSALPNChallenge: true,
		Logger:                  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acme.Stop)
	challengeSrv := &http.Server{Handler: acme.HTTPChallengeHandler(http.NotFoundHandler()), ReadHeaderTimeout: 10 * time.Second}
	go challengeSrv.Serve(challengeLn)
	t.Cleanup(func() { challengeSrv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := acme.Manage(ctx); err != nil {
		t.Fatalf("ACME issuance: %v", err)
	}

	// Serve the TLS side from a Store whose TLS certificates come from
	// ACME, and connect with crypto/tls trusting Pebble's root.
	dir := t.TempDir()
	pair := writeTestPair(t, newTestCA(t, false), dir, "site", nil, acmeTestDomain)
	s, err := NewStore(StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLSFallback: acme.GetCertificate},
		Source{Name: "edge", TLCP: &TLCPFiles{pair.SignCert, pair.SignKey, pair.EncCert, pair.EncKey}})
	if err != nil {
		t.Fatal(err)
	}
	tcfg := &tls.Config{GetCertificate: s.GetTLSCertificate}
	addr := testnet.Serve(t, func(c net.Conn) { tls.Server(c, tcfg).Handshake() })
	pebbleRoots := x509.NewCertPool()
	root := pebbleCA.GetRootCert(0)
	if root == nil {
		t.Fatal("pebble has no root")
	}
	pebbleRoots.AddCert(root.Cert)
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

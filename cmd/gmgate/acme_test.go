package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testacme"
	"github.com/gmgate/gmgate/internal/testredis"
)

const acmeDomain = "acme.gmgate.test"

// writeACMEConfig writes dir/gmgate.yaml and returns its path: top
// (state_dir, session_store), an auto listener "edge" whose TLS
// certificate Pebble issues by ACME with the acme settings given, and
// more listeners.
func writeACMEConfig(t *testing.T, dir string, pebble *testacme.Pebble, top string, acme []string, more string) string {
	t.Helper()
	pair := writeDualPair(t, dir)
	cfg := fmt.Sprintf(`%sadmin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp: {sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}
    tls:
      acme:
        domains: [%s]
        ca: %s
        ca_root: %s
        %s
    routes: [{upstream: app}]%s
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, top, pair.SignCert, pair.SignKey, pair.EncCert, pair.EncKey, acmeDomain, pebble.DirectoryURL, pebble.WriteServerRoot(dir), strings.Join(acme, "\n        "), more)
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// gmgate serve obtains the TLS certificate of an auto listener from an
// ACME CA (Pebble), by each challenge type, and serves it.
func TestServeObtainsACMECertificate(t *testing.T) {
	for _, tc := range []struct {
		challenge string
		port80    bool
	}{
		{"http-01", true},
		{"tls-alpn-01", false},
	} {
		t.Run(tc.challenge, func(t *testing.T) {
			dir := t.TempDir()
			pebble := testacme.New(t)
			port80 := ""
			if tc.port80 {
				port80 = `
  - name: port80
    listen: "127.0.0.1:0"
    protocol: http
    redirect_https: true`
			}
			cfgFile := writeACMEConfig(t, dir, pebble, "state_dir: state\n", []string{"email: ops@gmgate.test", "challenges: [" + tc.challenge + "]"}, port80)
			names := []string{"edge"}
			if tc.port80 {
				names = append(names, "port80")
			}
			srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), names...)
			httpPort := 0
			if tc.port80 {
				httpPort = srv.port(t, "port80")
			}
			// Pebble validates on the ports gmgate bound.
			pebble.Start(httpPort, srv.port(t, "edge"))

			client := &tls.Config{RootCAs: pebble.IssuerRoots(), ServerName: acmeDomain}
			var conn *tls.Conn
			deadline := time.Now().Add(90 * time.Second)
			for {
				var err error
				conn, err = tls.Dial("tcp", srv.addrs["edge"], client)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no Pebble-issued certificate served: %v\n%s", err, srv.logs)
				}
				time.Sleep(200 * time.Millisecond)
			}
			leaf := conn.ConnectionState().PeerCertificates[0]
			conn.Close()
			if leaf.DNSNames[0] != acmeDomain || leaf.Issuer.String() == leaf.Subject.String() {
				t.Fatalf("served %v issued by %s", leaf.DNSNames, leaf.Issuer)
			}
			srv.waitLog(t, `"msg":"ACME certificate obtained"`)
			// The challenge was answered on gmgate's own listener.
			srv.waitLog(t, `"challenge":"`+tc.challenge+`"`)
			if _, err := os.Stat(filepath.Join(dir, "state", "acme")); err != nil {
				t.Errorf("state directory: %v", err)
			}
			// Renewal state shows in the metrics.
			resp, err := http.Get("http://" + srv.admin + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{
				`gmgate_acme_issuance_total{kind="new",name="edge",result="success"} 1`,
				`gmgate_certificate_expiry_timestamp_seconds{name="` + acmeDomain + `",role="acme"}`,
			} {
				if !strings.Contains(string(body), want) {
					t.Errorf("metrics lack %s", want)
				}
			}
			if tc.port80 {
				// The port-80 listener redirects what is not a challenge.
				noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				req, _ := http.NewRequest("GET", "http://"+srv.addrs["port80"]+"/x", nil)
				req.Host = acmeDomain
				resp, err := noFollow.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if want := fmt.Sprintf("https://%s:%d/x", acmeDomain, srv.port(t, "edge")); resp.StatusCode != 301 || resp.Header.Get("Location") != want {
					t.Errorf("redirect %s to %q, want %q", resp.Status, resp.Header.Get("Location"), want)
				}
			}
		})
	}
}

// Two gmgate serve replicas with tls.acme.shared: the first obtains the
// certificate, and the second, started while Redis does not answer,
// serves the same certificate from Redis once it does, without ordering
// one of its own.
func TestReplicasShareACMECertificate(t *testing.T) {
	rs := testredis.Start(t)
	pebble := testacme.New(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "session.keys")
	if err := os.WriteFile(keys, []byte("4c1f0e5e2d8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("session_store:\n  keys_file: %s\n  redis: {addrs: [%q]}\n", keys, rs.Addr())
	cfgFile := writeACMEConfig(t, dir, pebble, store, []string{"challenges: [tls-alpn-01]", "shared: true"}, "")
	client := &tls.Config{RootCAs: pebble.IssuerRoots(), ServerName: acmeDomain}
	served := func(r *served) *x509.Certificate {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			conn, err := tls.Dial("tcp", r.addrs["edge"], client)
			if err == nil {
				defer conn.Close()
				return conn.ConnectionState().PeerCertificates[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no Pebble-issued certificate served: %v\n%s", err, r.logs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	r1 := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge")
	pebble.Start(0, r1.port(t, "edge"))
	first := served(r1)
	r1.waitLog(t, `"msg":"ACME certificate obtained"`)

	rs.Pause()
	r2 := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge")
	r2.waitLog(t, `"msg":"ACME has no certificate yet; trying again"`)
	rs.Resume()
	if second := served(r2); second.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("replica 2 serves certificate %v, replica 1 %v: want the one replica 1 obtained", second.SerialNumber, first.SerialNumber)
	}
	if strings.Contains(r2.logs.String(), "ACME certificate obtained") {
		t.Fatalf("replica 2 ordered a certificate of its own:\n%s", r2.logs)
	}
	// The certificate's key is in Redis, sealed.
	rc := rs.Client()
	defer rc.Close()
	ctx := context.Background()
	found := false
	for _, k := range rc.Keys(ctx, "gmgate:acme:f:*").Val() {
		found = found || strings.HasSuffix(k, ".key")
		if v := rc.HGet(ctx, k, "v").Val(); strings.Contains(v, "PRIVATE KEY") {
			t.Fatalf("%s holds a private key in the clear", k)
		}
	}
	if !found {
		t.Fatalf("no key in Redis: %v", rc.Keys(ctx, "*").Val())
	}
}

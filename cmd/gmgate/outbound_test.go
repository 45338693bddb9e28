package main

import (
	"bufio"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testnet"
)

// metricSum adds the samples of the metric name on the admin listener at
// admin whose label sets contain each of labels (`key="value"`).
func metricSum(t *testing.T, admin, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q", line)
		}
		sum += v
	}
	return sum
}

// TestServeClientMode runs two `gmgate serve` processes from
// configuration files: a legacy application's HTTP requests and TCP
// connections go to the first one's plain http and tcp listeners on
// loopback, which calls the second one, a TLCP-only partner that demands
// a client certificate, as a TLCP client: in HTTP/1.1, and in HTTP/2
// through an upstream with http2, which gmgate probe --http2 confirms the
// partner offers.
func TestServeClientMode(t *testing.T) {
	dir := t.TempDir()
	ca, srvPair := localPKI(t, dir)
	srv, err := srvPair.Write(dir, "localhost", nil)
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "legacy-app"}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := cliPair.Write(dir, "legacy-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "partner API: %s %s for %s", r.Method, r.URL.Path, r.Header.Get("X-Client-Subject"))
	}))
	defer api.Close()
	db := testnet.Serve(t, func(c net.Conn) {
		defer c.Close()
		b, _ := io.ReadAll(c)
		_, _ = c.Write([]byte(strings.ToUpper(string(b))))
	})

	partnerFile := filepath.Join(dir, "partner.yaml")
	writeFile(t, partnerFile, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: api
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp: &identity
      sign_cert: %[1]s
      sign_key: %[2]s
      enc_cert: %[3]s
      enc_key: %[4]s
      client_auth: require_and_verify
      client_ca: %[5]s
    session_headers: {client_subject: X-Client-Subject}
    routes: [{upstream: api}]
  - name: db
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp: *identity
    routes: [{upstream: db}]
upstreams:
  api: {targets: ["%[6]s"]}
  db: {targets: ["tcp://%[7]s"]}
`, srv.SignCert, srv.SignKey, srv.EncCert, srv.EncKey, srv.CACert, api.URL, db))
	partner := startServe(t, gmgateCommand("serve", "-c", partnerFile), "api", "db")

	legacyFile := filepath.Join(dir, "legacy.yaml")
	writeFile(t, legacyFile, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: partner-api}]
  - name: sql
    listen: "127.0.0.1:0"
    protocol: tcp
    routes: [{upstream: partner-db}]
  - name: app2
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: partner-h2}]
upstreams:
  partner-api:
    targets: ["tlcp://%[1]s"]
    host: target
    health: {path: /healthz}
    tlcp: &client
      ca: %[3]s
      server_name: localhost
      sign_cert: %[4]s
      sign_key: %[5]s
      enc_cert: %[6]s
      enc_key: %[7]s
      suites: [ECDHE_SM4_GCM_SM3, ECC_SM4_GCM_SM3]
  partner-db:
    targets: ["tlcp://%[2]s"]
    tlcp: *client
  partner-h2:
    targets: ["tlcp://%[1]s"]
    http2: true
    tlcp: *client
`, partner.addrs["api"], partner.addrs["db"], srv.CACert, cli.SignCert, cli.SignKey, cli.EncCert, cli.EncKey))
	if out, code := runGmgate(t, nil, "config", "check", "-c", legacyFile); code != 0 {
		t.Fatalf("config check: exit %d\n%s", code, out)
	}
	legacy := startServe(t, gmgateCommand("serve", "-c", legacyFile), "app", "sql", "app2")

	client := &http.Client{Timeout: 20 * time.Second}
	const n = 8
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("http://%s/accounts/%d", legacy.addrs["app"], i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("partner API: GET /accounts/%d for CN=legacy-app", i); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
		// host: target: the partner is asked for itself, not for the
		// application's address.
		if got := resp.Header.Get("X-Seen-Host"); got != partner.addrs["api"] {
			t.Fatalf("the partner saw Host %q, want the target's %q", got, partner.addrs["api"])
		}
	}
	// Keep-alive: fewer handshakes than requests (the health checks make
	// some too).
	handshakes := metricSum(t, legacy.admin, "gmgate_upstream_handshakes_total", `upstream="partner-api"`)
	if handshakes < 1 || handshakes >= n {
		t.Errorf("%d requests over %v handshakes", n, handshakes)
	}

	for i := range 3 {
		c, err := net.Dial("tcp", legacy.addrs["sql"])
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		msg := fmt.Sprintf("select %d;", i)
		_, _ = c.Write([]byte(msg))
		_ = c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != strings.ToUpper(msg) {
			t.Fatalf("tcp connection %d: %q %v", i, got, err)
		}
	}
	// HTTP/2 over TLCP: the partner saw HTTP/2 for each request through
	// app2 (its health checks are handshakes).
	for i := range n {
		resp, err := client.Post(fmt.Sprintf("http://%s/payments/%d", legacy.addrs["app2"], i), "text/plain", strings.NewReader("pay"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("partner API: POST /payments/%d for CN=legacy-app", i); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
		// Without host, the client's Host goes through.
		if got := resp.Header.Get("X-Seen-Host"); got != legacy.addrs["app2"] {
			t.Fatalf("the partner saw Host %q, want the client's %q", got, legacy.addrs["app2"])
		}
	}
	if v := metricSum(t, partner.admin, "gmgate_request_duration_seconds_count", `http_version="2"`); v != n {
		t.Errorf("the partner saw %v HTTP/2 requests, want %d", v, n)
	}
	out, code := runGmgate(t, nil, "probe", "--ca", srv.CACert, "--cert", cli.SignCert, "--key", cli.SignKey, "--http2", "https://"+partner.addrs["api"]+"/probe")
	if code != 0 || !strings.Contains(out, "* ALPN: h2") || !strings.Contains(out, "< HTTP/2.0 200") || !strings.Contains(out, "partner API: GET /probe for CN=legacy-app") {
		t.Errorf("probe --http2: exit %d\n%s", code, out)
	}

	// Resumption to the partner, seen on both sides.
	if v := metricSum(t, legacy.admin, "gmgate_upstream_handshakes_total", `upstream="partner-db"`, `resumed="true"`); v < 2 {
		t.Errorf("the client side resumed %v sessions over 3 connections", v)
	}
	if v := metricSum(t, partner.admin, "gmgate_handshakes_resumed_total", `protocol="tlcp"`); v < 2 {
		t.Errorf("the partner counted %v resumed handshakes", v)
	}
}

// TestCheckClientMode: config check reports the problems of a tlcp://
// upstream's client settings (and of its host) with their lines, as serve
// does.
func TestCheckClientMode(t *testing.T) {
	dir := t.TempDir()
	_, pair := localPKI(t, dir)
	files, err := pair.Write(dir, "client", nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmgate.yaml")
	// The client certificate's key is the encryption key, and the CA file
	// does not exist.
	config := func(more string) string {
		return fmt.Sprintf(`listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tlcp://partner.example.cn"]
    tlcp:
      ca: %s
      sign_cert: %s
      sign_key: %s
%s`, filepath.Join(dir, "nope.crt"), files.SignCert, files.EncKey, more)
	}
	writeFile(t, file, config("      suites: [ECDHE_SM4_GCM_SM3]\n      profile: tongsuo\n    host: partner.example.cn/v1\n"))
	for _, args := range [][]string{{"config", "check", "-c", file}, {"serve", "-c", file}} {
		out, code := runGmgate(t, nil, args...)
		if code != exitConfig {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
		for _, want := range []string{
			file + `:10: upstreams.partner.tlcp.suites[0]: ECDHE_SM4_GCM_SM3 needs the client's encryption certificate`,
			file + `:11: upstreams.partner.tlcp.profile: unknown profile "tongsuo"`,
			file + `:12: upstreams.partner.host: "partner.example.cn/v1" is not a host name or IP address with an optional port`,
			`write "target" to send each target's own host`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	// With the schema right, the files are checked: the CA file is
	// missing and the key belongs to another certificate.
	writeFile(t, file, config(""))
	out, code := runGmgate(t, nil, "config", "check", "-c", file)
	if code != exitConfig || !strings.Contains(out, file+":7: upstreams.partner.tlcp.ca: ca "+filepath.Join(dir, "nope.crt")+" does not exist; give the path of the PEM file of the CA certificates") ||
		!strings.Contains(out, file+":9: upstreams.partner.tlcp.sign_key: sign_key "+files.EncKey+" does not belong to sign_cert "+files.SignCert) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

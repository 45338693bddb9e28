package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// TestAdminOffLoopbackNeedsAccessControl: config check and serve refuse
// an admin listener off loopback with neither a token nor client
// certificates, with the field and the fix.
func TestAdminOffLoopbackNeedsAccessControl(t *testing.T) {
	f := newSitesFixture(t, "api")
	tokenFile := filepath.Join(f.dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(admin string) string {
		cfg := fmt.Sprintf("admin: %s\nlog: {access: \"off\"}\nlisteners:\n  - name: edge\n    listen: \"127.0.0.1:0\"\n    protocol: auto\n    sites:\n%supstreams:\n  api: {targets: [%q]}\n",
			admin, f.site("api", true, ""), f.upstreams["api"])
		file := filepath.Join(t.TempDir(), "gmgate.yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	// 192.0.2.0/24 is TEST-NET-1: never bound here.
	open := write(`{listen: "192.0.2.10:9180"}`)
	for _, args := range [][]string{{"config", "check", "-c", open}, {"config", "check", "--offline", "-c", open}, {"serve", "-c", open}} {
		out, err := gmgateCommand(args...).CombinedOutput()
		if err == nil {
			t.Fatalf("gmgate %s accepted an open admin listener:\n%s", strings.Join(args, " "), out)
		}
		for _, want := range []string{"gmgate.yaml:1: admin.listen", "is not a loopback address", "admin.token_file", "admin.client_ca"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("gmgate %s: no %q in:\n%s", strings.Join(args, " "), want, out)
			}
		}
	}
	// With a token it passes the checks that do not bind the address.
	withToken := write(fmt.Sprintf(`{listen: "192.0.2.10:9180", token_file: %q}`, tokenFile))
	if out, err := gmgateCommand("config", "check", "--offline", "-c", withToken).CombinedOutput(); err != nil {
		t.Errorf("an admin listener with a token refused: %v\n%s", err, out)
	}
	// Write actions without a token are refused, on loopback too.
	writes := write(`{listen: "127.0.0.1:0", write_actions: true}`)
	if out, err := gmgateCommand("config", "check", "-c", writes).CombinedOutput(); err == nil || !strings.Contains(string(out), "admin.write_actions") {
		t.Errorf("write actions without a token: %v\n%s", err, out)
	}
	// A token file too short to be a secret is refused by check and
	// serve alike, without quoting it.
	short := filepath.Join(f.dir, "short.token")
	if err := os.WriteFile(short, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shortCfg := write(fmt.Sprintf(`{listen: "127.0.0.1:0", token_file: %q}`, short))
	for _, cmd := range [][]string{{"config", "check", "-c", shortCfg}, {"serve", "-c", shortCfg}} {
		out, err := gmgateCommand(cmd...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "admin.token_file") || strings.Contains(string(out), "hunter2") {
			t.Errorf("gmgate %s with a short token: %v\n%s", cmd[0], err, out)
		}
	}
}

// TestAdminTokenAndWriteActions runs gmgate serve with a token on the
// admin listener: everything but the probes and the console's files
// needs it; write actions are off until admin.write_actions, and then
// drain a target, put it back and reload, each logged with who did it.
func TestAdminTokenAndWriteActions(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tokenFile, []byte("ops-oncall "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("write actions off", func(t *testing.T) {
		c := startConsoleFixture(t, fmt.Sprintf(`{listen: "127.0.0.1:0", token_file: %q}`, tokenFile))
		for _, path := range []string{"/api/v1/config", "/api/v1/upstreams", "/metrics"} {
			if code, _ := c.get(t, "GET", path, ""); code != 401 {
				t.Errorf("GET %s without the token: %d, want 401", path, code)
			}
			if code, _ := c.get(t, "GET", path, token); code != 200 {
				t.Errorf("GET %s with the token: %d", path, code)
			}
		}
		for _, path := range []string{"/healthz", "/readyz", "/console/"} {
			if code, _ := c.get(t, "GET", path, ""); code != 200 {
				t.Errorf("GET %s without the token: %d, want 200", path, code)
			}
		}
		if code, body := c.get(t, "POST", "/api/v1/reload", token); code != 403 || !strings.Contains(string(body), "admin.write_actions") {
			t.Errorf("reload with write actions off: %d %s", code, body)
		}
	})

	t.Run("write actions on", func(t *testing.T) {
		c := startConsoleFixture(t, fmt.Sprintf(`{listen: "127.0.0.1:0", token_file: %q, write_actions: true}`, tokenFile))
		live := c.f.upstreams["api"]
		hostPort := strings.TrimPrefix(live, "http://")
		drain := "/api/v1/upstreams/api/targets/" + hostPort + "/drain"
		if code, _ := c.get(t, "POST", drain, ""); code != 401 {
			t.Errorf("drain without the token: %d, want 401", code)
		}
		if code, body := c.get(t, "POST", drain, token); code != 200 {
			t.Fatalf("drain: %d %s", code, body)
		}
		state := func() string {
			code, body := c.get(t, "GET", "/api/v1/upstreams", token)
			var ups struct {
				Upstreams []struct {
					Name    string `json:"name"`
					Targets []struct{ URL, State string }
				} `json:"upstreams"`
			}
			if code != 200 || json.Unmarshal(body, &ups) != nil {
				t.Fatalf("upstreams: %d %s", code, body)
			}
			for _, u := range ups.Upstreams {
				for _, tg := range u.Targets {
					if u.Name == "api" && tg.URL == live {
						return tg.State
					}
				}
			}
			return ""
		}
		if s := state(); s != "drained" {
			t.Fatalf("after drain the target is %q", s)
		}
		// With its live target drained and the other refusing, api has
		// nothing to send to.
		conn, err := c.f.dialTLCP(c.srv.addrs["edge"], "api.example.cn", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := request(t, conn, "api.example.cn", "/"); code != 502 && code != 503 {
			t.Errorf("a request to a drained upstream: %d", code)
		}
		if code, body := c.get(t, "POST", strings.TrimSuffix(drain, "drain")+"undrain", token); code != 200 {
			t.Fatalf("undrain: %d %s", code, body)
		}
		if s := state(); s != "in_service" {
			t.Fatalf("after undrain the target is %q", s)
		}
		code, body := c.get(t, "POST", "/api/v1/reload", token)
		if code != 200 || !strings.Contains(string(body), `"generation": 2`) {
			t.Fatalf("reload: %d %s", code, body)
		}
		code, body = c.get(t, "GET", "/api/v1/config", token)
		if code != 200 || !strings.Contains(string(body), `"result": "success"`) {
			t.Errorf("reload history: %d %s", code, body)
		}
		c.srv.waitLog(t, `"msg":"admin write action","action":"reload","by":"ops-oncall"`)
		logs := c.srv.logs.String()
		for _, want := range []string{`"action":"drain","by":"ops-oncall"`, `"action":"undrain","by":"ops-oncall"`, `"target":"` + hostPort + `"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log has no %s", want)
			}
		}
		if strings.Contains(logs, token) {
			t.Error("the log carries the token")
		}
	})
}

// TestServeDemoPrintsConsole: gmgate serve --demo prints the console's
// URL, and the console and its API answer there.
func TestServeDemoPrintsConsole(t *testing.T) {
	cmd := gmgateCommand("serve", "--demo", "--state", t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startServe(t, cmd)
	sc := bufio.NewScanner(stdout)
	var console string
	for console == "" && sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Console: "); ok {
			console = rest
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if !strings.HasPrefix(console, "http://127.0.0.1:") || !strings.HasSuffix(console, "/console/") {
		t.Fatalf("no console URL printed (%q)", console)
	}
	resp, err := http.Get(console)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<title>gmgate console</title>") {
		t.Fatalf("%s: %d %.200s", console, resp.StatusCode, page)
	}
	resp, err = http.Get(strings.TrimSuffix(console, "/console/") + "/api/v1/certificates")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"role": "sign"`) {
		t.Fatalf("certificates: %d %.300s", resp.StatusCode, body)
	}
}

// TestAdminClientCertificates: an admin listener with admin.cert, key and
// client_ca speaks TLS and lets in clients whose certificate the CA
// verifies, and no one else.
func TestAdminClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueTLS(pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := server.Write(dir, "admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueTLS(pki.IssueOptions{Subject: pkix.Name{CommonName: "monitoring"}})
	if err != nil {
		t.Fatal(err)
	}
	c := startConsoleFixture(t, fmt.Sprintf(`{listen: "127.0.0.1:0", cert: %q, key: %q, client_ca: %q}`, certFile, keyFile, filepath.Join(dir, pki.CACertFile)))
	get := func(cert *tls.Certificate) (int, error) { return adminGetTLS(c.srv.admin, ca.Root.Raw, cert) }
	if code, err := get(nil); err == nil {
		t.Errorf("without a client certificate: %d", code)
	}
	cert := &tls.Certificate{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key}
	if code, err := get(cert); err != nil || code != 200 {
		t.Errorf("with a client certificate: %d %v", code, err)
	}
	// Plain HTTP gets nothing.
	if resp, err := http.Get(c.admin + "/api/v1/certificates"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered 200")
		}
	}
}

// TestAdminClientCertificatesTLCP: with admin.tlcp as well as admin.cert,
// the admin listener speaks TLCP and TLS on one port; client_ca holds an
// SM2 CA for TLCP clients and an ECDSA CA for TLS clients, and each lets
// in the clients whose certificate it verifies, and no one else.
func TestAdminClientCertificatesTLCP(t *testing.T) {
	dir := t.TempDir()
	smCA, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	if err := smCA.Write(filepath.Join(dir, "sm2-ca"), nil); err != nil {
		t.Fatal(err)
	}
	if err := tlsCA.Write(filepath.Join(dir, "tls-ca"), nil); err != nil {
		t.Fatal(err)
	}
	var bundle []byte
	for _, ca := range []string{"sm2-ca", "tls-ca"} {
		b, err := os.ReadFile(filepath.Join(dir, ca, pki.CACertFile))
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, b...)
	}
	clientCA := filepath.Join(dir, "admin-clients.pem")
	if err := os.WriteFile(clientCA, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	loopback := pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	serverPair, err := smCA.IssueDual(loopback)
	if err != nil {
		t.Fatal(err)
	}
	sm, err := serverPair.Write(dir, "admin-sm2", nil)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := tlsCA.IssueTLS(loopback)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := serverTLS.Write(dir, "admin-tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	monitoring := pki.IssueOptions{Subject: pkix.Name{CommonName: "monitoring"}}
	smClient, err := smCA.IssueDual(monitoring)
	if err != nil {
		t.Fatal(err)
	}
	tlsClient, err := tlsCA.IssueTLS(monitoring)
	if err != nil {
		t.Fatal(err)
	}
	// A TLCP client certificate of another SM2 CA.
	strangerCA, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := strangerCA.IssueDual(monitoring)
	if err != nil {
		t.Fatal(err)
	}

	c := startConsoleFixture(t, fmt.Sprintf(`{listen: "127.0.0.1:0", cert: %q, key: %q, client_ca: %q,
  tlcp: {sign_cert: %q, sign_key: %q, enc_cert: %q, enc_key: %q}}`, certFile, keyFile, clientCA, sm.SignCert, sm.SignKey, sm.EncCert, sm.EncKey))

	getTLCP := func(cert *tlcp.Certificate) (int, error) {
		conf := &tlcp.Config{RootCAs: smCA.Pool(), ServerName: "127.0.0.1"}
		if cert != nil {
			conf.Certificates = []tlcp.Certificate{*cert}
		}
		conn, err := (&tlcp.Dialer{Config: conf, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}).Dial("tcp", c.srv.admin)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		code, _, err := tryRequest(conn, c.srv.admin, "/api/v1/certificates")
		return code, err
	}
	if code, err := getTLCP(nil); err == nil {
		t.Errorf("TLCP without a client certificate: %d", code)
	}
	if code, err := getTLCP(stranger.Certificate()); err == nil {
		t.Errorf("TLCP with a certificate of another CA: %d", code)
	}
	if code, err := getTLCP(smClient.Certificate()); err != nil || code != 200 {
		t.Errorf("TLCP with a client certificate: %d %v", code, err)
	}

	getTLS := func(cert *tls.Certificate) (int, error) { return adminGetTLS(c.srv.admin, tlsCA.Root.Raw, cert) }
	if code, err := getTLS(nil); err == nil {
		t.Errorf("TLS without a client certificate: %d", code)
	}
	if code, err := getTLS(&tls.Certificate{Certificate: [][]byte{tlsClient.Cert.Raw}, PrivateKey: tlsClient.Key}); err != nil || code != 200 {
		t.Errorf("TLS with a client certificate: %d %v", code, err)
	}
	// Plain HTTP gets nothing.
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(c.admin + "/api/v1/certificates"); err == nil {
		resp.Body.Close()
		t.Errorf("plain HTTP answered %d", resp.StatusCode)
	}
}

// adminGetTLS asks the admin listener at addr, over TLS verified against
// the root certificate (DER), for /api/v1/certificates, presenting cert
// when it is not nil, and returns the status.
func adminGetTLS(addr string, rootDER []byte, cert *tls.Certificate) (int, error) {
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return 0, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	conf := &tls.Config{RootCAs: roots}
	if cert != nil {
		conf.Certificates = []tls.Certificate{*cert}
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get("https://" + addr + "/api/v1/certificates")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

package main

import (
	"context"
	"crypto"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// tls13SMPartner is a partner's TLS 1.3 ShangMi server, in the test: it
// demands and verifies a client certificate, answers each HTTP request
// with what its handshake was (and closes the connection, so that every
// request makes one), and echoes upper-cased bytes on a second port.
type tls13SMPartner struct {
	api, echo string
}

// loadTLS13SMIdentity loads the signing pair of a dual certificate as a
// TLS 1.3 identity, and the CA file as a pool.
func loadTLS13SMIdentity(t *testing.T, pair pki.DualFiles) (tls13.Certificate, *smx509.CertPool) {
	t.Helper()
	id, err := certs.LoadTLCP(pair.SignCert, pair.SignKey, pair.EncCert, pair.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pair.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certs.CAPool(pair.CACert, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	return tls13.Certificate{Certificate: id.SignCertificate, PrivateKey: id.SignKey.(crypto.Signer)}, pool
}

func startTLS13SMPartner(t *testing.T, cert tls13.Certificate, clientCAs *smx509.CertPool) tls13SMPartner {
	t.Helper()
	cfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		ClientAuth:   tls13.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return tls13.NewListener(ln, cfg)
	}
	type connKey struct{}
	api := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cs := r.Context().Value(connKey{}).(*tls13.Conn).ConnectionState()
			subject := ""
			if len(cs.VerifiedChains) > 0 {
				subject = cs.VerifiedChains[0][0].Subject.CommonName
			}
			w.Header().Set("Connection", "close")
			fmt.Fprintf(w, "%s %s for %s suite=%s group=%s resumed=%t", r.Method, r.URL.Path, subject,
				tls13.CipherSuiteName(cs.CipherSuite), cs.Group, cs.DidResume)
		}),
	}
	apiLn := listen()
	go func() { _ = api.Serve(apiLn) }()
	t.Cleanup(func() { api.Close() })
	echoLn := listen()
	go func() {
		for {
			c, err := echoLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return tls13SMPartner{api: apiLn.Addr().String(), echo: echoLn.Addr().String()}
}

// TestServeTLS13SMUpstream: `gmgate serve` calls a partner that speaks
// TLS 1.3 with the ShangMi suites (RFC 8998) and demands a client
// certificate, through tls13sm:// upstreams configured in a file: HTTP
// requests with the default suite and hybrid group and with the CCM suite
// and curveSM2 alone, each new connection after the first resumed, and a
// tcp listener's connections.
func TestServeTLS13SMUpstream(t *testing.T) {
	dir := t.TempDir()
	ca, srvPair := localPKI(t, dir)
	srv, err := srvPair.Write(dir, "localhost", nil)
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "billing"}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := cliPair.Write(dir, "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	srvID, srvCAs := loadTLS13SMIdentity(t, srv)
	partner := startTLS13SMPartner(t, srvID, srvCAs)

	file := filepath.Join(dir, "gmgate.yaml")
	writeFile(t, file, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
  - {name: app2, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner-sm2}]}
  - {name: stream, listen: "127.0.0.1:0", protocol: tcp, routes: [{upstream: partner-echo}]}
upstreams:
  partner:
    targets: ["tls13sm://%[1]s"]
    tls13sm: &client
      ca: %[3]s
      server_name: localhost
      sign_cert: %[4]s
      sign_key: %[5]s
  partner-sm2:
    targets: ["tls13sm://%[1]s"]
    tls13sm:
      <<: *client
      groups: [curveSM2]
      suites: [TLS_SM4_CCM_SM3]
  partner-echo:
    targets: ["tls13sm://%[2]s"]
    tls13sm: *client
`, partner.api, partner.echo, srv.CACert, cli.SignCert, cli.SignKey))
	if out, code := runGmgate(t, nil, "config", "check", "-c", file); code != 0 {
		t.Fatalf("config check: exit %d\n%s", code, out)
	}
	gw := startServe(t, gmgateCommand("serve", "-c", file), "app", "app2", "stream")

	client := &http.Client{Timeout: 20 * time.Second}
	get := func(listener, path string) string {
		t.Helper()
		resp, err := client.Get("http://" + gw.addrs[listener] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s via %s: %d %q", path, listener, resp.StatusCode, body)
		}
		return string(body)
	}
	for _, c := range []struct{ listener, upstream, suite, group string }{
		{"app", "partner", "TLS_SM4_GCM_SM3", "curveSM2MLKEM768"},
		{"app2", "partner-sm2", "TLS_SM4_CCM_SM3", "curveSM2"},
	} {
		for i := range 3 {
			got := get(c.listener, fmt.Sprintf("/orders/%d", i))
			want := fmt.Sprintf("GET /orders/%d for billing suite=%s group=%s resumed=%t", i, c.suite, c.group, i > 0)
			if got != want {
				t.Errorf("%s request %d: partner saw %q, want %q", c.upstream, i, got, want)
			}
		}
		if v := metricSum(t, gw.admin, "gmgate_upstream_handshakes_total", `upstream="`+c.upstream+`"`, `suite="`+c.suite+`"`, `resumed="true"`); v < 2 {
			t.Errorf("%s: %v resumed handshakes counted, want at least 2", c.upstream, v)
		}
	}

	for i := range 2 {
		c, err := net.Dial("tcp", gw.addrs["stream"])
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
	if v := metricSum(t, gw.admin, "gmgate_upstream_handshakes_total", `upstream="partner-echo"`); v < 2 {
		t.Errorf("partner-echo: %v handshakes counted", v)
	}
	// gmgate probe speaks it too: the suite, the group and resumption on
	// a second connection; a missing client certificate is named.
	probeArgs := []string{"probe", "--protocol", "tls13-sm", "--ca", srv.CACert, "--sni", "localhost", "--cert", cli.SignCert, "--key", cli.SignKey}
	out, code := runGmgate(t, nil, append(probeArgs, "--resume", "https://"+partner.api+"/probe")...)
	for _, want := range []string{
		"* TLS 1.3 ShangMi handshake done in", "TLS_SM4_GCM_SM3, group curveSM2MLKEM768 (resumed: no)",
		"* second connection resumed the session: yes (TLS_SM4_GCM_SM3, group curveSM2MLKEM768",
		"GET /probe for billing suite=TLS_SM4_GCM_SM3 group=curveSM2MLKEM768 resumed=false",
		"GET /probe for billing suite=TLS_SM4_GCM_SM3 group=curveSM2MLKEM768 resumed=true",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("probe --protocol tls13-sm --resume: exit %d, no %q in\n%s", code, want, out)
		}
	}
	out, code = runGmgate(t, nil, append(probeArgs, "--group", "curveSM2", "--suite", "TLS_SM4_CCM_SM3", "https://"+partner.api+"/ccm")...)
	if code != 0 || !strings.Contains(out, "TLS_SM4_CCM_SM3, group curveSM2 (resumed: no)") || !strings.Contains(out, "GET /ccm for billing suite=TLS_SM4_CCM_SM3 group=curveSM2 resumed=false") {
		t.Errorf("probe --group curveSM2: exit %d\n%s", code, out)
	}
	out, code = runGmgate(t, nil, "probe", "--protocol", "tls13-sm", "--ca", srv.CACert, "--sni", "localhost", "https://"+partner.api+"/")
	if code == 0 || !strings.Contains(out, "certificate required") || !strings.Contains(out, "give --cert and --key") {
		t.Errorf("probe without a client certificate: exit %d\n%s", code, out)
	}

	// A rotated client certificate (files replaced, as a renewal does) is
	// presented from the next connection on, in a full handshake: no
	// ticket made for the old one is offered with it.
	newPair, err := ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "billing-2"}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := newPair.Write(t.TempDir(), "billing-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{next.SignKey, cli.SignKey}, {next.SignCert, cli.SignCert}} {
		data, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		tmp := f[1] + ".new"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f[1]); err != nil {
			t.Fatal(err)
		}
	}
	var rotated string
	testwait.For(t, "the partner to see the new client certificate", func() bool {
		rotated = get("app", "/rotated")
		return strings.Contains(rotated, " for billing-2 ")
	})
	if !strings.HasSuffix(rotated, "resumed=false") {
		t.Errorf("the first connection with the new certificate: %q, want a full handshake", rotated)
	}
	if got := get("app", "/rotated"); got != "GET /rotated for billing-2 suite=TLS_SM4_GCM_SM3 group=curveSM2MLKEM768 resumed=true" {
		t.Errorf("the next connection: %q", got)
	}
}

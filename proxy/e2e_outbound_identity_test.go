package proxy

// Client mode end to end, the client identity: rotated by a reload or
// during a handshake, held by a crypto card, and the GmSSL profile.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
)

// TestOutboundReloadRotatesIdentity: a reload after the client
// certificate files were replaced keeps the pool (its configuration did
// not change) but presents the new certificate from the next request on
// (a new connection: the kept-alive one was made with the old), and
// never resumes a session made for the old one; a CA file whose contents changed makes a
// new pool, with no session verified under the old roots.
func TestOutboundReloadRotatesIdentity(t *testing.T) {
	p := getPKI(t)
	first, _ := clientIdentityFor(t, p, "app-2025")
	second, _ := clientIdentityFor(t, p, "app-2026")
	dir := tempDir(t)
	live := pki.DualFileNames(dir, "client")
	live.CACert = filepath.Join(dir, "ca.crt")
	install := func(from pki.DualFiles) {
		for _, f := range [][2]string{{from.SignCert, live.SignCert}, {from.SignKey, live.SignKey}, {from.EncCert, live.EncCert}, {from.EncKey, live.EncKey}, {p.dual.CACert, live.CACert}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
	section := strings.Replace(identitySection(p, live, "ECC_SM4_GCM_SM3"), "ca: "+p.dual.CACert, "ca: "+live.CACert, 1)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tlcp://%s"]
    health: {disabled: true}
    tlcp:
%s
`, svc.Addr("edge"), indent(section, "      "))
	gw := startServer(t, parseConfig(t, doc), nil)
	client := &http.Client{Timeout: 20 * time.Second}
	url := "http://" + gw.Addr("app").String() + "/"
	seen := func() (subject, resumed string) {
		t.Helper()
		resp, body := get(t, client, url)
		var e echoed
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return e.Headers.Get("X-Client-Subject"), e.Headers.Get("X-Tlcp-Resumed")
	}
	pool := func() *upstream.Pool {
		return gw.current().pools["partner"]
	}
	if s, _ := seen(); s != "CN=app-2025" {
		t.Fatalf("subject %q", s)
	}
	install(second)
	before := pool()
	if err := gw.Reload(parseConfig(t, doc)); err != nil {
		t.Fatal(err)
	}
	if pool() != before {
		t.Fatal("the pool was replaced although its configuration and CA file did not change")
	}
	if s, r := seen(); s != "CN=app-2026" || r != "false" {
		t.Fatalf("after the rotation: subject %q, resumed %q; want the new certificate in a full handshake", s, r)
	}
	pool().Transport.CloseIdle()
	if s, r := seen(); s != "CN=app-2026" || r != "true" {
		t.Fatalf("the new certificate's session: subject %q, resumed %q", s, r)
	}

	// The same CA file path with other contents: a new pool.
	writePEM(t, live.CACert, p.ca.Root.Raw, p.ca.Root.Raw)
	if err := gw.Reload(parseConfig(t, doc)); err != nil {
		t.Fatal(err)
	}
	if pool() == before {
		t.Fatal("the pool was kept although its CA file changed")
	}
	if _, r := seen(); r != "false" {
		t.Fatalf("a session verified under the old CA file was resumed")
	}
}

// TestOutboundCardHeldClientKey: the client keys are key references
// opened through accel like the listeners' (here a backend that, like a
// crypto card, cannot do SM2 key agreement). Signing works; the default
// suites leave out ECDHE, and an explicit ECDHE suite is refused at its
// line.
func TestOutboundCardHeldClientKey(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
	section := fmt.Sprintf(`ca: %s
server_name: localhost
sign_cert: %s
sign_key: cardlike:%s
enc_cert: %s
enc_key: cardlike:%s`, p.dual.CACert, id.SignCert, id.SignKey, id.EncCert, id.EncKey)
	target := fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String())

	gw, logs := clientGateway(t, "http", target, section, "")
	resp, body := get(t, &http.Client{Timeout: 20 * time.Second}, "http://"+gw.Addr("app").String()+"/")
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Headers.Get("X-Client-Subject") != "CN=legacy-app" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"suite": tlcp.CipherSuiteName(tlcp.DefaultCipherSuites[0])}); v != 1 {
		t.Errorf("%v ECC handshakes", v)
	}
	if !strings.Contains(logs.String(), "ECDHE suites not offered") {
		t.Errorf("the log does not say the ECDHE suites were left out:\n%s", logs)
	}

	cfg := parseConfig(t, fmt.Sprintf(`listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: [%s]
    tlcp:
%s
      suites: [ECDHE_SM4_GCM_SM3]
`, target, indent(section, "      ")))
	_, err := New(cfg, Options{Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "gmgate.yaml:13: upstreams.partner.tlcp.suites: the ECDHE suites need SM2 key agreement") || !strings.Contains(err.Error(), "cardlike backend") {
		t.Fatalf("got %v", err)
	}
}

// TestOutboundGmSSLProfile: profile: gmssl (signing certificate alone
// with ECC, 71-byte ECDHE key exchange, CertificateVerify over the raw
// handshake) authenticates to a gmgate service, which accepts both
// profiles, in an ECC and an ECDHE suite.
func TestOutboundGmSSLProfile(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
	for _, suite := range []string{"ECC_SM4_CBC_SM3", "ECDHE_SM4_GCM_SM3"} {
		gw, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, suite)+"\nprofile: gmssl", "")
		resp, body := get(t, &http.Client{Timeout: 20 * time.Second}, "http://"+gw.Addr("app").String()+"/")
		var e echoed
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Headers.Get("X-Client-Subject") != "CN=legacy-app" {
			t.Fatalf("%s: %d %s", suite, resp.StatusCode, body)
		}
	}
}

// TestOutboundRotationDuringHandshake: a client certificate rotated while
// a handshake that presented the old one is under way does not let that
// handshake's session be resumed under the new certificate: the next
// connection presents the new one.
func TestOutboundRotationDuringHandshake(t *testing.T) {
	p := getPKI(t)
	first, _ := clientIdentityFor(t, p, "app-2025")
	second, _ := clientIdentityFor(t, p, "app-2026")
	dir := tempDir(t)
	live := pki.DualFileNames(dir, "client")
	install := func(from pki.DualFiles) {
		for _, f := range [][2]string{{from.SignCert, live.SignCert}, {from.SignKey, live.SignKey}, {from.EncCert, live.EncCert}, {from.EncKey, live.EncKey}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)

	// The partner holds its first full handshake after the client's
	// certificate arrived, until the rotation is done; it answers every
	// connection with the client's subject and whether it resumed.
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	scfg := &tlcp.Config{
		Certificates: []tlcp.Certificate{*cert},
		ClientAuth:   tlcp.RequireAndVerifyClientCert,
		ClientCAs:    p.roots,
		VerifyPeerCertificate: func([][]byte, [][]*smx509.Certificate) error {
			if held.CompareAndSwap(false, true) {
				close(reached)
				<-release
			}
			return nil
		},
	}
	partner := testnet.Serve(t, func(c net.Conn) {
		tc := tlcp.Server(c, scfg)
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		st := tc.ConnectionState()
		fmt.Fprintf(tc, "%s %t\n", st.PeerCertificates[0].Subject, st.DidResume)
	})

	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:0", protocol: tcp, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tlcp://%s"]
    health: {disabled: true}
    tlcp:
%s
`, partner, indent(identitySection(p, live, "ECC_SM4_GCM_SM3"), "      "))
	gw := startServer(t, parseConfig(t, doc), nil)
	seen := make(chan string, 1)
	call := func() {
		c, err := net.Dial("tcp", gw.Addr("app").String())
		if err != nil {
			seen <- err.Error()
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			line = err.Error()
		}
		seen <- strings.TrimSpace(line)
	}
	go call()
	select {
	case <-reached:
	case s := <-seen:
		t.Fatalf("the first connection ended before the partner saw its certificate: %s", s)
	}
	install(second)
	if err := gw.Reload(parseConfig(t, doc)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if s := <-seen; s != "CN=app-2025 false" {
		t.Fatalf("first connection: %q", s)
	}
	go call()
	if s := <-seen; s != "CN=app-2026 false" {
		t.Fatalf("after the rotation: %q; want the new certificate in a full handshake", s)
	}
	go call()
	if s := <-seen; s != "CN=app-2026 true" {
		t.Fatalf("the new certificate's session: %q", s)
	}
}

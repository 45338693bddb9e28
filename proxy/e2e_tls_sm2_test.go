package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// sm2Identity issues an SM2 certificate for localhost apart from the
// test PKI's dual pair, and returns its signing files and certificate.
func sm2Identity(t *testing.T, p *testPKI, dir, cn string) pki.DualFiles {
	t.Helper()
	pair, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := pair.Write(dir, cn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A tls listener's site with an SM2 identity alone serves TLS 1.3
// ShangMi clients and refuses crypto/tls ones with unrecognized_name;
// on an auto listener, a site's tls.sm2 identity answers TLS 1.3 ShangMi
// clients in place of its tlcp signing pair, which still serves TLCP.
func TestTLSSM2Sites(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	own := sm2Identity(t, p, dir, "sm2-own")
	cfg := parseConfig(t, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: tlsport
    listen: "127.0.0.1:0"
    protocol: tls
    session_headers: {protocol: X-Proto}
    sites:
      - name: gm
        hosts: [localhost]
        tls:
          sm2: {cert: %[1]s, key: %[2]s}
        routes: [{upstream: app}]
      - name: web
        hosts: [web.example.cn]
        tls: {cert: %[3]s, key: %[4]s}
        routes: [{upstream: app}]
  - name: autoport
    listen: "127.0.0.1:0"
    protocol: auto
    session_headers: {protocol: X-Proto}
    tlcp: {sign_cert: %[5]s, sign_key: %[6]s, enc_cert: %[7]s, enc_key: %[8]s}
    tls:
      cert: %[3]s
      key: %[4]s
      sm2: {cert: %[1]s, key: %[2]s}
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[9]q]}
`, own.SignCert, own.SignKey, p.tlsCert, p.tlsKey, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, up.URL))
	s := startServer(t, cfg, nil)

	for _, l := range []string{"tlsport", "autoport"} {
		c := newShangMiClient(t, p, &tls13.Config{})
		req, err := http.NewRequest("GET", "https://"+s.Addr(l).String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "localhost"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		var e echoed
		if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if got := e.Headers.Get("X-Proto"); got != "tls1.3-sm" {
			t.Errorf("%s: the upstream saw protocol %q", l, got)
		}
		if st := c.last(); len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "sm2-own" {
			t.Errorf("%s: TLS 1.3 ShangMi was served with another certificate than tls.sm2's", l)
		}
	}
	// The auto listener's TLCP clients still get the signing pair.
	conn, err := tlcp.Dial("tcp", s.Addr("autoport").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if cs := conn.ConnectionState(); len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName == "sm2-own" {
		t.Error("TLCP was served with the tls.sm2 certificate")
	}
	conn.Close()
	// crypto/tls for the ShangMi-only site's name.
	_, err = tls.Dial("tcp", s.Addr("tlsport").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})
	if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Errorf("crypto/tls client of a site with tls.sm2 alone: %v, want unrecognized_name", err)
	}
	// The other site's crypto/tls clients are served on the same port.
	tc, err := tls.Dial("tcp", s.Addr("tlsport").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "web.example.cn", InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("crypto/tls client of the other site: %v", err)
	}
	tc.Close()
}

// The identity of tls.sm2 is the certificate store's: a reload that
// finds new files serves them to the next handshake.
func TestTLSSM2Rotates(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	first, second := sm2Identity(t, p, dir, "first"), sm2Identity(t, p, dir, "second")
	live := pki.DualFileNames(filepath.Join(dir, "live"), "site")
	if err := os.MkdirAll(filepath.Dir(live.SignCert), 0o700); err != nil {
		t.Fatal(err)
	}
	install := func(from pki.DualFiles) {
		for _, f := range [][2]string{{from.SignCert, live.SignCert}, {from.SignKey, live.SignKey}} {
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
	newConfig := func() *config.Config {
		return parseConfig(t, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    tls: {sm2: {cert: %s, key: %s}}
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, live.SignCert, live.SignKey, up.URL))
	}
	s := startServer(t, newConfig(), nil)
	served := func() string {
		c := newShangMiClient(t, p, &tls13.Config{})
		getEchoed(t, c.Client, gatewayURL(s, "/"))
		return c.last().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}
	install(second)
	if err := s.Reload(newConfig()); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "second" {
		t.Errorf("after the rotation, served %q", got)
	}
}

// config check reports a tls.sm2 certificate that is not SM2 at its line,
// a missing SM2 client CA file at its own, and warns of a site host the
// SM2 certificate does not name.
func TestCheckTLSSM2(t *testing.T) {
	p := getPKI(t)
	missing := filepath.Join(t.TempDir(), "missing-ca.crt")
	doc := `admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    sites:
      - name: bad
        hosts: [bad.example.cn]
        tls:
          sm2:
            cert: %[1]s
            key: %[2]s
        routes: [{upstream: app}]
      - name: ca
        hosts: [localhost]
        tls:
          client_auth: require_and_verify
          sm2:
            cert: %[3]s
            key: %[4]s
            client_ca: %[5]s
        routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:9"]}
`
	cfg := parseConfig(t, fmt.Sprintf(doc, p.tlsCert, p.tlsKey, p.dual.SignCert, p.dual.SignKey, missing))
	_, err := Check(cfg, CheckOptions{Offline: true})
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("check: %v, want problems", err)
	}
	want := map[string]int{"listeners[0].sites[0].tls.sm2.cert": 12, "listeners[0].sites[1].tls.sm2.client_ca": 22}
	for _, pr := range ce.Problems {
		line, ok := want[pr.Path]
		if !ok {
			t.Errorf("unexpected problem %s", pr)
			continue
		}
		delete(want, pr.Path)
		if pr.Line != line {
			t.Errorf("%s at line %d, want %d", pr, pr.Line, line)
		}
	}
	for path := range want {
		t.Errorf("no problem at %s:\n%v", path, err)
	}

	// A good configuration whose SM2 certificate does not name a host.
	cfg = parseConfig(t, fmt.Sprintf(doc, p.dual.SignCert, p.dual.SignKey, p.dual.SignCert, p.dual.SignKey, p.dual.CACert))
	res, err := Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	var warned bytes.Buffer
	for _, w := range res.Warnings {
		fmt.Fprintln(&warned, w)
	}
	if !strings.Contains(warned.String(), `"bad.example.cn" is not named by the SM2 certificate`) {
		t.Errorf("no warning of the host the SM2 certificate does not name:\n%s", warned.String())
	}
}

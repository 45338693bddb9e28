package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testacme"
)

const acmeDomain = "acme.gmgate.test"

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
			pair := writeDualPair(t, dir)
			port80 := ""
			if tc.port80 {
				port80 = `
  - name: port80
    listen: "127.0.0.1:0"
    protocol: http
    redirect_https: true`
			}
			cfg := fmt.Sprintf(`state_dir: state
admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp: {sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}
    tls:
      acme:
        domains: [%s]
        email: ops@gmgate.test
        ca: %s
        ca_root: %s
        challenges: [%s]
    routes: [{upstream: app}]%s
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, pair.SignCert, pair.SignKey, pair.EncCert, pair.EncKey, acmeDomain, pebble.DirectoryURL, pebble.WriteServerRoot(dir), tc.challenge, port80)
			cfgFile := filepath.Join(dir, "gmgate.yaml")
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
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

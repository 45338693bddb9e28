package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// TestServeGMCapableTLSClients runs gmgate serve from a configuration
// file and replays 360 Secure Browser's first ClientHello (a TLS hello
// that lists the TLCP suites) byte for byte: an auto listener whose site
// has a TLCP pair and a TLS certificate answers it in TLCP and serves a
// request; with gm_capable_tls_clients: tls the same hello gets a TLS
// ServerHello; a tlcp listener with tls refuses it with handshake_failure;
// /metrics counts each outcome.
func TestServeGMCapableTLSClients(t *testing.T) {
	const name = "server.test" // the vectors' server name
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	dual, err := pair.Write(dir, "gm", nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, tlsKey, err := leaf.Write(dir, "gm-tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "gm %s", r.URL.Path)
	}))
	t.Cleanup(up.Close)
	id := fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}", dual.SignCert, dual.SignKey, dual.EncCert, dual.EncKey)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    http2: false
    tlcp: %[1]s
    tls: {cert: %[2]s, key: %[3]s}
    routes: [{upstream: app}]
  - name: legacy
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp: %[1]s
    tls: {cert: %[2]s, key: %[3]s}
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
  - name: gm-only
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp: %[1]s
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[4]q]}
`, id, tlsCert, tlsKey, up.URL)
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge", "legacy", "gm-only")

	wire := readGMHello(t, "360-chromium86-gm-last.hex")
	hello, err := tlcp.ParseTLSClientHello(wire)
	if err != nil {
		t.Fatal(err)
	}
	var msg []byte
	for rest := wire; len(rest) >= 5; {
		n := int(rest[3])<<8 | int(rest[4])
		msg = append(msg, rest[5:5+n]...)
		rest = rest[5+n:]
	}

	t.Run("auto: TLCP", func(t *testing.T) {
		raw, err := net.DialTimeout("tcp", srv.addrs["edge"], 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
		c, err := tlcp.ClientWithHello(raw, &tlcp.Config{RootCAs: ca.Pool(), ServerName: name}, hello.RecordVersion, msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Handshake(); err != nil {
			t.Fatalf("TLCP handshake after the TLS hello: %v", err)
		}
		if st := c.ConnectionState(); st.Version != tlcp.VersionTLCP {
			t.Fatalf("version %#04x", st.Version)
		}
		fmt.Fprintf(c, "GET /gm HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "gm /gm" {
			t.Fatalf("%s %q", resp.Status, body)
		}
	})
	t.Run("auto with tls: TLS", func(t *testing.T) {
		hdr, body := firstAnswer(t, srv.addrs["legacy"], wire)
		if hdr[0] != 22 || hdr[1] != 3 || hdr[2] != 3 || len(body) < 6 || body[0] != 2 || body[4] != 3 || body[5] != 3 {
			t.Fatalf("first record %x, not a TLS ServerHello", hdr)
		}
	})
	t.Run("tlcp with tls: handshake_failure", func(t *testing.T) {
		hdr, body := firstAnswer(t, srv.addrs["gm-only"], wire)
		if hdr[0] != 21 || len(body) != 2 || body[0] != 2 || body[1] != byte(tlcp.AlertHandshakeFailure) {
			t.Fatalf("answer %x %x, not a fatal handshake_failure", hdr, body)
		}
	})
	for _, w := range []struct{ listener, outcome string }{{"edge", "tlcp"}, {"legacy", "tls"}, {"gm-only", "refused"}} {
		testwait.For(t, "gmgate_gm_capable_tls_hellos_total for "+w.listener, func() bool {
			return metricSum(t, srv.admin, "gmgate_gm_capable_tls_hellos_total", `listener="`+w.listener+`"`, `site="default"`, `outcome="`+w.outcome+`"`) == 1
		})
	}
}

// readGMHello reads a ClientHello vector of tlcp/testdata/gm-capable-hellos.
func readGMHello(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tlcp", "testdata", "gm-capable-hellos", file))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			text.WriteString(strings.Join(strings.Fields(line), ""))
		}
	}
	wire, err := hex.DecodeString(text.String())
	if err != nil {
		t.Fatal(err)
	}
	return wire
}

// firstAnswer sends wire to addr and returns the first record that comes
// back.
func firstAnswer(t *testing.T, addr string, wire []byte) (hdr, body []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	hdr = make([]byte, 5)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatal(err)
	}
	body = make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	return hdr, body
}

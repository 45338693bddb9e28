package proxy

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// gmHelloName is the server name the GM-capable hello vectors ask for.
const gmHelloName = "server.test"

// gmHelloVector reads a ClientHello of tlcp/testdata/gm-capable-hellos:
// the records a GM-capable TLS client sends, byte for byte.
func gmHelloVector(t testing.TB, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tlcp", "testdata", "gm-capable-hellos", file))
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
		t.Fatalf("%s: %v", file, err)
	}
	return wire
}

// gmCapableServer runs a gateway from a configuration file with four
// listeners whose sites have a TLCP pair and a TLS certificate for
// server.test: auto (a site, gm_capable_tls_clients left to its default),
// auto-tls (gm_capable_tls_clients: tls), tlcp-refuse (a tlcp listener
// with tls) and tlcp-gm (a tlcp listener with the default). It returns
// the server with its process and access logs.
func gmCapableServer(t *testing.T) (*Server, *testlog.Buffer, *testlog.Buffer) {
	t.Helper()
	p := getPKI(t)
	dir := t.TempDir()
	pair, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{gmHelloName}})
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
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{gmHelloName}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, tlsKey, err := leaf.Write(dir, "gm-tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "app")
	id := fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}", dual.SignCert, dual.SignKey, dual.EncCert, dual.EncKey)
	tlsID := fmt.Sprintf("{cert: %s, key: %s}", tlsCert, tlsKey)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
listeners:
  - name: auto
    listen: "127.0.0.1:0"
    protocol: auto
    sites:
      - name: gm
        hosts: [%[3]s]
        tlcp: %[1]s
        tls: %[2]s
        routes: [{upstream: app}]
  - name: auto-tls
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp: %[1]s
    tls: %[2]s
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
  - name: tlcp-refuse
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp: %[1]s
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
  - name: tlcp-gm
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp: %[1]s
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[4]q]}
`, id, tlsID, gmHelloName, up.URL)
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	logs, access := &testlog.Buffer{}, &testlog.Buffer{}
	s := startWith(t, cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), AccessLog: slog.New(slog.NewJSONHandler(access, nil))})
	return s, logs, access
}

// replayGMHello plays a GM-capable TLS client on listener: it sends the
// vector's hello byte for byte, completes the TLCP handshake the gateway
// answers with, and sends one request over it. It returns the body of the
// answer.
func replayGMHello(t *testing.T, s *Server, listener, file string) string {
	t.Helper()
	wire := gmHelloVector(t, file)
	hello, err := tlcp.ParseTLSClientHello(wire)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", s.Addr(listener).String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
	conn, err := tlcp.ClientWithHello(raw, &tlcp.Config{RootCAs: getPKI(t).roots, ServerName: gmHelloName}, hello.RecordVersion, helloBody(wire))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.HandshakeContext(context.Background()); err != nil {
		t.Fatalf("%s on %s: the TLCP handshake after a TLS hello failed: %v", file, listener, err)
	}
	cs := conn.ConnectionState()
	if cs.Version != tlcp.VersionTLCP || len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].DNSNames[0] != gmHelloName {
		t.Fatalf("%s on %s: connection state %+v", file, listener, cs)
	}
	var status, body string
	switch cs.NegotiatedProtocol {
	case "h2":
		status, body = h2Exchange(t, conn, ":method", "GET", ":scheme", "https", ":authority", gmHelloName, ":path", "/gm")
	case "http/1.1", "":
		fmt.Fprintf(conn, "GET /gm HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", gmHelloName)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, body = fmt.Sprint(resp.StatusCode), string(b)
	default:
		t.Fatalf("ALPN %q", cs.NegotiatedProtocol)
	}
	var e echoed
	if status != "201" || json.Unmarshal([]byte(body), &e) != nil || e.Path != "/gm" || e.Upstream != "app" {
		t.Fatalf("%s on %s: %s %q", file, listener, status, body)
	}
	return body
}

// helloBody reassembles the ClientHello message from its records.
func helloBody(wire []byte) []byte {
	var msg []byte
	for len(wire) >= 5 {
		n := int(wire[3])<<8 | int(wire[4])
		msg = append(msg, wire[5:5+n]...)
		wire = wire[5+n:]
	}
	return msg
}

// gmFirstRecord sends a vector's records to listener and returns the first
// record the gateway answers with.
func gmFirstRecord(t *testing.T, s *Server, listener, file string) (hdr, body []byte) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr(listener).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(gmHelloVector(t, file)); err != nil {
		t.Fatal(err)
	}
	hdr = make([]byte, 5)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatalf("%s on %s: no answer: %v", file, listener, err)
	}
	body = make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	return hdr, body
}

// TestGMCapableTLSClients replays 360 Secure Browser's first ClientHello
// (a TLS hello that lists the TLCP suites), byte for byte, through the
// gateway: on an auto listener whose site has both identities it gets
// TLCP and its request is answered; with gm_capable_tls_clients: tls it
// gets TLS as before; on a tlcp listener with tls it is refused with
// handshake_failure, and with the default it gets TLCP. The metric counts
// each outcome by listener and site, and the logs mark the connections.
func TestGMCapableTLSClients(t *testing.T) {
	s, logs, access := gmCapableServer(t)
	gmVectors := []string{"360-chromium86-gm-last.hex", "360-chromium86-gm-first.hex", "tls12-ecc-sm4-cbc-sm3.hex"}

	for _, file := range gmVectors {
		replayGMHello(t, s, "auto", file)
	}
	replayGMHello(t, s, "tlcp-gm", "360-chromium86-gm-last.hex")

	// gm_capable_tls_clients: tls on an auto listener: the same hello
	// gets a TLS ServerHello (record 0x0303, not TLCP's 0x0101).
	hdr, body := gmFirstRecord(t, s, "auto-tls", "360-chromium86-gm-last.hex")
	if hdr[0] != 22 || hdr[1] != 3 || hdr[2] != 3 || len(body) < 6 || body[0] != 2 || body[4] != 3 || body[5] != 3 {
		t.Fatalf("auto-tls: the first record %x %x is not a TLS ServerHello", hdr, body[:min(len(body), 6)])
	}
	// A TLS hello without TLCP suites is TLS on the auto listener, and
	// not counted.
	hdr, body = gmFirstRecord(t, s, "auto", "chromium86-no-gm.hex")
	if hdr[0] != 22 || hdr[1] != 3 || len(body) < 1 || body[0] != 2 {
		t.Fatalf("auto, hello without TLCP suites: first record %x", hdr)
	}
	// On a tlcp listener with tls: handshake_failure (40), fatal, in a
	// record of the client's version (0x0301), for a TLS client to read.
	hdr, body = gmFirstRecord(t, s, "tlcp-refuse", "360-chromium86-gm-last.hex")
	if hdr[0] != 21 || hdr[1] != 3 || hdr[2] != 1 || len(body) != 2 || body[0] != 2 || body[1] != byte(tlcp.AlertHandshakeFailure) {
		t.Fatalf("tlcp-refuse: the answer %x %x is not a fatal handshake_failure alert", hdr, body)
	}

	want := []struct {
		listener, site, outcome string
		n                       float64
	}{
		{"auto", "gm", "tlcp", 3},
		{"tlcp-gm", "default", "tlcp", 1},
		{"auto-tls", "default", "tls", 1},
		{"tlcp-refuse", "default", "refused", 1},
	}
	testwait.For(t, "gmgate_gm_capable_tls_hellos_total to count every hello", func() bool {
		mf := scrape(t, s)
		for _, w := range want {
			if v, _ := metricValue(mf, "gmgate_gm_capable_tls_hellos_total", map[string]string{"listener": w.listener, "site": w.site, "outcome": w.outcome}); v != w.n {
				return false
			}
		}
		return true
	})
	mf := scrape(t, s)
	sum := func(name string, labels map[string]string) float64 {
		total := 0.0
		for _, m := range mf[name].GetMetric() {
			if hasLabels(m, labels) {
				total += m.GetCounter().GetValue()
			}
		}
		return total
	}
	if v := sum("gmgate_gm_capable_tls_hellos_total", nil); v != 6 {
		t.Errorf("gmgate_gm_capable_tls_hellos_total sums to %v, want 6 (the hello without TLCP suites is not counted)", v)
	}
	if v := sum("gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "site": "gm", "result": "ok"}); v != 3 {
		t.Errorf("gmgate_handshakes_total{protocol=tlcp,site=gm,result=ok} sums to %v, want 3", v)
	}

	// The access log keeps protocol tlcp and marks the TLS-form hello;
	// the refusal's log line says what happened.
	testwait.For(t, "the access log lines of the GM requests", func() bool {
		return len(jsonLines(t, access.String(), "request")) == 4
	})
	for _, l := range jsonLines(t, access.String(), "request") {
		if l["protocol"] != "tlcp" || l["gm_capable_tls_hello"] != "tlcp" || l["sni"] != gmHelloName {
			t.Errorf("access log line %v", l)
		}
	}
	testwait.For(t, "the log line of the refused hello", func() bool {
		for _, l := range jsonLines(t, logs.String(), "handshake failed") {
			if l["listener"] == "tlcp-refuse" {
				return l["gm_capable_tls_hello"] == "refused" && l["alert_sent"] == "handshake_failure" && l["protocol"] == "tlcp"
			}
		}
		return false
	})
}

// gm_capable_tls_clients is a key of the file: config check warns where
// it has no effect, and refuses a wrong value at its line.
func TestGMCapableCheck(t *testing.T) {
	p := getPKI(t)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: web
    listen: "127.0.0.1:0"
    protocol: tls
    tls: {cert: %s, key: %s}
    gm_capable_tls_clients: tlcp
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, p.tlsCert, p.tlsKey)
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(cfg, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range res.Warnings {
		if w.Path == "listeners[0].gm_capable_tls_clients" && w.Line == 8 && strings.Contains(w.Msg, "has no effect") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warning at line 8 about gm_capable_tls_clients: %v", res.Warnings)
	}
}

package proxy

import (
	"bufio"
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

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/tlcp"
)

// forgedIdentity are headers a client writes to pass for another: the
// session header names another listener or site of the configuration
// sets, in their case and '_' variants, and the certificate headers of
// RFC 9440.
var forgedIdentity = []string{
	"X-Tlcp-Client-Subject: CN=teller-1",
	"X_tlcp_client_subject: CN=teller-2",
	"x-TLCP-client-FINGERPRINT: 00ff",
	"X-Tlcp-Client-Verified: true",
	"X_TLCP_CLIENT_VERIFIED: true",
	"X-Site-Serial: 01",
	"Client-Cert: :MIIB:",
	"client_cert_chain: :MIIB:",
	"CLIENT-CERT-CHAIN: :MIIB:",
}

// identityGateway runs, from a configuration file read as gmgate serve
// reads it, a listener "edge" that sends the client's identity in
// session headers, a site of another listener that sends one under
// other names, and listeners "bare" (TLCP) and "local" (plain HTTP) that
// send none, all to one upstream that echoes what it got.
func identityGateway(t *testing.T, upstream string) *Server {
	t.Helper()
	p := getPKI(t)
	id := fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}", p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	doc := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp: %[1]s
    session_headers: {client_subject: X-Tlcp-Client-Subject, client_fingerprint: X-Tlcp-Client-Fingerprint}
    routes: [{upstream: app}]
  - name: sites
    listen: "127.0.0.1:0"
    sites:
      - name: tellers
        default: true
        tlcp: %[1]s
        session_headers: {client_serial: X-Site-Serial}
        routes: [{upstream: app}]
  - name: bare
    listen: "127.0.0.1:0"
    tlcp: %[1]s
    http2: true
    routes: [{upstream: app}]
  - name: local
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[2]q]}
`, id, upstream)
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, cfg, nil)
}

// sendForged sends a request with the forged identity headers on c and
// returns the headers the upstream received.
func sendForged(c net.Conn, extra ...string) (http.Header, error) {
	req := "GET /whoami HTTP/1.1\r\nHost: localhost\r\nX-Custom: kept\r\n" + strings.Join(append(forgedIdentity, extra...), "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e echoed
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: %v", resp.Status, err)
	}
	return e.Headers, nil
}

// sendForgedH2 sends the forged identity headers in an HTTP/2 request on
// c, which chose h2, and returns the headers the upstream received.
func sendForgedH2(t *testing.T, c net.Conn) http.Header {
	t.Helper()
	fields := []string{":method", "GET", ":scheme", "https", ":authority", "localhost", ":path", "/whoami"}
	for _, f := range forgedIdentity {
		name, value, _ := strings.Cut(f, ":")
		fields = append(fields, strings.ToLower(name), strings.TrimSpace(value))
	}
	status, body := h2Exchange(t, c, fields...)
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s %q: %v", status, body, err)
	}
	return e.Headers
}

// forgedLeft returns the forged identity headers (by their normalised
// name) found in h.
func forgedLeft(h http.Header) []string {
	var left []string
	for k, v := range h {
		for _, f := range forgedIdentity {
			name, _, _ := strings.Cut(f, ":")
			if forward.NormalHeaderName(k) == forward.NormalHeaderName(name) {
				left = append(left, k+": "+strings.Join(v, ","))
				break
			}
		}
	}
	return left
}

// TestIdentityHeadersStrippedEverywhere is item 3 of the second review:
// on listeners that set no session headers, a client's headers named as
// another listener's or site's identity headers (in any case, with '_'
// for '-'), or Client-Cert and Client-Cert-Chain, never reach the
// upstream, which the other listener tells who its clients are under the
// same names.
func TestIdentityHeadersStrippedEverywhere(t *testing.T) {
	up := echoUpstream(t, "app")
	s := identityGateway(t, up.URL)
	p := getPKI(t)
	dial := map[string]func() (net.Conn, error){
		"bare": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("bare").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"local": func() (net.Conn, error) { return net.Dial("tcp", s.Addr("local").String()) },
		"edge": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"sites": func() (net.Conn, error) {
			return tlcp.Dial("tcp", s.Addr("sites").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
	}
	for name, d := range dial {
		t.Run(name, func(t *testing.T) {
			c, err := d()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			h, err := sendForged(c)
			if err != nil {
				t.Fatal(err)
			}
			if h.Get("X-Custom") != "kept" {
				t.Errorf("an ordinary header was lost: %v", h)
			}
			left := forgedLeft(h)
			// The listeners that send identities tell the upstream
			// that the client sent no verified certificate: only that
			// is left.
			if (name == "edge" || name == "sites") && len(left) == 1 && left[0] == "X-Tlcp-Client-Verified: false" {
				return
			}
			if len(left) != 0 {
				t.Errorf("the upstream got forged identity headers: %q", left)
			}
		})
	}
	t.Run("bare HTTP/2", func(t *testing.T) {
		c := dialTLCPTo(t, s, "bare", "h2")
		if left := forgedLeft(sendForgedH2(t, c)); len(left) != 0 {
			t.Errorf("the upstream got forged identity headers: %q", left)
		}
	})
}

// dialTLCPTo makes a TLCP connection to the named listener, offering
// protos by ALPN.
func dialTLCPTo(t *testing.T, s *Server, listener string, protos ...string) *tlcp.Conn {
	t.Helper()
	c, err := tlcp.Dial("tcp", s.Addr(listener).String(), &tlcp.Config{RootCAs: getPKI(t).roots, ServerName: "localhost", NextProtos: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// TestServeRefusesHostileRequests runs gmgate serve with two sites on one
// port, pay.test requiring a client certificate and open.test the default
// without, in front of one name-based upstream (nginx's server_name: the
// Host up to a colon, in any case, without a trailing dot), a second
// listener that sends no identity headers, and a port-80 redirect, and
// attacks it as the second security review did:
//
//   - a client without a certificate on the open site names pay.test in a
//     malformed Host (pay.test:1:2 and others): 400, never the pay virtual
//     host;
//   - a client of the second listener sends the identity headers the first
//     one sets: the upstream never gets them;
//   - a first record of 2^14+1 bytes: record_overflow at once;
//   - Host: evil.example on port 80: redirected to the default site's
//     name, not to evil.example.
func TestServeRefusesHostileRequests(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	dual := map[string]pki.DualFiles{}
	for _, name := range []string{"pay", "open", "localhost"} {
		host := name + ".test"
		if name == "localhost" {
			host = name
		}
		pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		if dual[name], err = pair.Write(dir, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"open.test"}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, tlsKey, err := leaf.Write(dir, "open-tls", nil)
	if err != nil {
		t.Fatal(err)
	}

	// The upstream answers by virtual host and says which identity
	// headers it got.
	var mu sync.Mutex
	var identities []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range r.Header {
			if n := strings.ToLower(strings.ReplaceAll(k, "_", "-")); n == "x-tlcp-client-subject" || n == "client-cert" {
				mu.Lock()
				identities = append(identities, k+": "+strings.Join(v, ","))
				mu.Unlock()
			}
		}
		name := r.Host
		if i := strings.IndexByte(name, ':'); i >= 0 {
			name = name[:i]
		}
		if strings.TrimSuffix(strings.ToLower(name), ".") == "pay.test" {
			fmt.Fprint(w, "pay vhost")
			return
		}
		fmt.Fprint(w, "open vhost")
	}))
	defer up.Close()

	tlcpOf := func(f pki.DualFiles) string {
		return fmt.Sprintf("{sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s", f.SignCert, f.SignKey, f.EncCert, f.EncKey)
	}
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
timeouts: {client_hello: 10m, handshake: 10m}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    session_headers: {client_subject: X-Tlcp-Client-Subject}
    sites:
      - name: pay
        hosts: [pay.test]
        tlcp: %s, client_auth: require_and_verify, client_ca: %s}
        routes: [{upstream: vhosts}]
      - name: open
        hosts: [open.test]
        default: true
        tlcp: %s}
        tls: {cert: %s, key: %s}
        routes: [{upstream: vhosts}]
  - name: bare
    listen: "127.0.0.1:0"
    tlcp: %s}
    routes: [{upstream: vhosts}]
  - name: port80
    listen: "127.0.0.1:0"
    protocol: http
    redirect_https: true
upstreams:
  vhosts: {targets: [%q]}
`, tlcpOf(dual["pay"]), filepath.Join(dir, "ca.crt"), tlcpOf(dual["open"]), tlsCert, tlsKey, tlcpOf(dual["localhost"]), up.URL)
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge", "bare", "port80")

	dial := func(listener, sni string) *tlcp.Conn {
		t.Helper()
		c, err := tlcp.Dial("tcp", srv.addrs[listener], &tlcp.Config{RootCAs: ca.Pool(), ServerName: sni, SendServerName: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
	send := func(c net.Conn, req string) (int, string) {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	t.Run("malformed Host", func(t *testing.T) {
		for _, host := range []string{"pay.test:1:2", "pay.test::", "pay.test:80:", "PAY.test:1:2"} {
			if status, body := send(dial("edge", "open.test"), "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); status != 400 || strings.Contains(body, "pay vhost") {
				t.Errorf("Host %q: %d %q, want 400", host, status, body)
			}
		}
		if status, _ := send(dial("edge", "open.test"), "GET / HTTP/1.1\r\nHost: pay.test\r\n\r\n"); status != 421 {
			t.Errorf("Host pay.test: %d, want 421", status)
		}
		if status, body := send(dial("edge", "open.test"), "GET / HTTP/1.1\r\nHost: open.test\r\n\r\n"); status != 200 || body != "open vhost" {
			t.Errorf("Host open.test: %d %q", status, body)
		}
	})

	t.Run("forged identity", func(t *testing.T) {
		req := "GET / HTTP/1.1\r\nHost: localhost\r\nX-Tlcp-Client-Subject: CN=teller-1\r\nX_tlcp_client_subject: CN=teller-2\r\nClient-Cert: :MIIB:\r\n\r\n"
		if status, _ := send(dial("bare", "localhost"), req); status != 200 {
			t.Fatalf("status %d", status)
		}
		mu.Lock()
		defer mu.Unlock()
		sort.Strings(identities)
		if len(identities) != 0 {
			t.Errorf("the upstream got identity headers from a client: %q", identities)
		}
	})

	t.Run("oversized first record", func(t *testing.T) {
		c, err := net.Dial("tcp", srv.addrs["edge"])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		body := append([]byte{1, 0, 0x9c, 0x40}, bytes.Repeat([]byte{0xab}, 1<<14-3)...)
		_, _ = c.Write(append([]byte{22, 1, 1, byte(len(body) >> 8), byte(len(body))}, body...))
		got, err := io.ReadAll(c)
		if want := []byte{21, 1, 1, 0, 2, 2, 22}; !bytes.Equal(got, want) {
			t.Errorf("answered % x (%v), want the record_overflow alert and the end of the connection", got, err)
		}
	})

	t.Run("port-80 redirect", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(srv.addrs["edge"])
		for host, want := range map[string]string{
			"pay.test":     "https://pay.test:" + port + "/x",
			"evil.example": "https://open.test:" + port + "/x",
		} {
			c, err := net.Dial("tcp", srv.addrs["port80"])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 301 || resp.Header.Get("Location") != want {
				t.Errorf("Host %s: %d to %q, want 301 to %q", host, resp.StatusCode, resp.Header.Get("Location"), want)
			}
		}
	})
}

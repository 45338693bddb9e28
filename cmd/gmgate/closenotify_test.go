package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// TestServeCloseNotify checks, through gmgate serve, what the gateway
// leaves on the wire after a client ends a TLCP connection: nothing for a
// handshake-only connection, close_notify after a request was answered.
func TestServeCloseNotify(t *testing.T) {
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: ecc
    listen: "127.0.0.1:0"
    tlcp: {sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s, suites: [ECC_SM4_GCM_SM3]}
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["%s"]}
`, p.files.SignCert, p.files.SignKey, p.files.EncCert, p.files.EncKey, namedUpstream(t, "app"))
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", file), "ecc")

	// recordsAfterClose ends the client's side (close_notify, then FIN)
	// and returns the types of the records the gateway sends until it
	// closes the connection.
	recordsAfterClose := func(t *testing.T, c *tlcp.Conn) []byte {
		t.Helper()
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		raw := c.NetConn()
		raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(raw)
		if err != nil {
			t.Fatal(err)
		}
		var types []byte
		for len(b) >= 5 {
			n := int(b[3])<<8 | int(b[4])
			if len(b) < 5+n {
				t.Fatalf("truncated record: %x", b)
			}
			types = append(types, b[0])
			b = b[5+n:]
		}
		if len(b) != 0 {
			t.Fatalf("bytes after the last record: %x", b)
		}
		return types
	}
	dial := func(t *testing.T) *tlcp.Conn {
		t.Helper()
		c, err := tlcp.Dial("tcp", srv.addrs["ecc"], &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("handshake only", func(t *testing.T) {
		if got := recordsAfterClose(t, dial(t)); len(got) != 0 {
			t.Fatalf("record types after the client closed: %v, want none", got)
		}
	})
	t.Run("after a request", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "app" {
			t.Fatalf("response %d %q", resp.StatusCode, body)
		}
		if got, want := recordsAfterClose(t, c), []byte{21}; !slices.Equal(got, want) {
			t.Fatalf("record types after the client closed: %v, want %v (close_notify)", got, want)
		}
	})
}

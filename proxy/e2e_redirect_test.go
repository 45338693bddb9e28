package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
)

// redirectGateway runs, from a configuration file read as gmgate serve
// reads it, a TLS listener "edge" with the given sites section (or the
// flat form's tls section when sites is ""), and a port-80 listener that
// redirects to it.
func redirectGateway(t *testing.T, sites string) *Server {
	t.Helper()
	p := getPKI(t)
	tls := fmt.Sprintf("{cert: %s, key: %s}", p.tlsCert, p.tlsKey)
	edge := "    tls: " + tls + "\n    routes: [{upstream: app}]\n"
	if sites != "" {
		edge = "    protocol: tls\n    sites:\n" + fmt.Sprintf(sites, tls)
	}
	doc := `admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
` + edge + `  - name: port80
    listen: "127.0.0.1:0"
    protocol: http
    redirect_https: true
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`
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

// redirectOf sends a request with the given Host ("" for none, in
// HTTP/1.0) to the port-80 listener and returns the status and Location.
func redirectOf(t *testing.T, s *Server, host string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr("port80").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET /a/b?c=d HTTP/1.0\r\n\r\n"
	if host != "" {
		req = "GET /a/b?c=d HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestRedirectOnlyToServedNames is item 6 of the second review: the
// port-80 redirect goes to the host the request named only when the
// HTTPS listener serves that name (a site's host, exact or wildcard, or
// in the flat form a name of its certificate); any other goes to the
// default site's name, or gets 400 where there is none.
func TestRedirectOnlyToServedNames(t *testing.T) {
	check := func(t *testing.T, s *Server, host string, wantStatus int, wantHost string) {
		t.Helper()
		_, port, _ := net.SplitHostPort(s.Addr("edge").String())
		status, location := redirectOf(t, s, host)
		want := ""
		if wantHost != "" {
			want = "https://" + wantHost + ":" + port + "/a/b?c=d"
		}
		if status != wantStatus || location != want {
			t.Errorf("Host %q: %d to %q, want %d to %q", host, status, location, wantStatus, want)
		}
	}

	t.Run("sites with a default", func(t *testing.T) {
		s := redirectGateway(t, `      - {name: www, hosts: [www.example.test, "*.static.example.test"], default: true, tls: %[1]s, routes: [{upstream: app}]}
      - {name: api, hosts: [api.example.test], tls: %[1]s, routes: [{upstream: app}]}
`)
		check(t, s, "www.example.test", 301, "www.example.test")
		check(t, s, "API.Example.Test.:80", 301, "api.example.test")
		check(t, s, "img.static.example.test", 301, "img.static.example.test")
		for _, other := range []string{"evil.example", "evil.example:80", "static.example.test", "127.0.0.1", "[::1]"} {
			check(t, s, other, 301, "www.example.test")
		}
		check(t, s, "", 301, "www.example.test")
		check(t, s, "evil.example:1:2", 400, "")
		check(t, s, "www.example.test:1:2", 400, "")
	})

	t.Run("sites without a default", func(t *testing.T) {
		s := redirectGateway(t, `      - {name: api, hosts: [api.example.test], tls: %[1]s, routes: [{upstream: app}]}
`)
		check(t, s, "api.example.test", 301, "api.example.test")
		check(t, s, "evil.example", 400, "")
		check(t, s, "", 400, "")
	})

	t.Run("the flat form", func(t *testing.T) {
		// The one site serves the names of its certificate: localhost
		// and 127.0.0.1.
		s := redirectGateway(t, "")
		check(t, s, "localhost", 301, "localhost")
		check(t, s, "127.0.0.1:80", 301, "127.0.0.1")
		check(t, s, "evil.example", 301, "localhost")
		check(t, s, "10.0.0.1", 301, "localhost")
	})
}

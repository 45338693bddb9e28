package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
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
	"github.com/gmgate/gmgate/internal/testsession"
	"github.com/gmgate/gmgate/tlcp"
)

// sitesFixture is the PKI and upstreams of the multi-site serve test: an
// SM2 CA and an ECDSA CA, and for each site a dual certificate, a TLS
// certificate and an upstream that names the site.
type sitesFixture struct {
	dir       string
	ca        *pki.CA
	tlsRoots  *x509.CertPool
	dual      map[string]pki.DualFiles
	tlsFiles  map[string][2]string
	upstreams map[string]string
	// release lets the api upstream's /slow request finish.
	release chan struct{}
	entered chan struct{}
}

func newSitesFixture(t *testing.T, names ...string) *sitesFixture {
	t.Helper()
	f := &sitesFixture{dir: t.TempDir(), dual: map[string]pki.DualFiles{}, tlsFiles: map[string][2]string{},
		upstreams: map[string]string{}, release: make(chan struct{}), entered: make(chan struct{}, 1), tlsRoots: x509.NewCertPool()}
	var err error
	if f.ca, err = pki.NewCA(pki.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.ca.Write(f.dir, nil); err != nil {
		t.Fatal(err)
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		host := name + ".example.cn"
		pair, err := f.ca.IssueDual(pki.IssueOptions{DNSNames: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		if f.dual[name], err = pair.Write(f.dir, name, nil); err != nil {
			t.Fatal(err)
		}
		leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		c, k, err := leaf.Write(f.dir, name+"-tls", nil)
		if err != nil {
			t.Fatal(err)
		}
		f.tlsFiles[name] = [2]string{c, k}
		root, _ := x509.ParseCertificate(leaf.Root.Raw)
		f.tlsRoots.AddCert(root)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				f.entered <- struct{}{}
				<-f.release
			}
			w.Header().Set("X-Site", name)
			fmt.Fprintf(w, "%s %s", name, r.Proto)
		}))
		t.Cleanup(up.Close)
		f.upstreams[name] = up.URL
	}
	return f
}

// site is one site's YAML under sites:.
func (f *sitesFixture) site(name string, isDefault bool, extraTLCP string) string {
	d, tc := f.dual[name], f.tlsFiles[name]
	return fmt.Sprintf(`      - name: %s
        hosts: [%s.example.cn]
        default: %v
        tlcp:
          sign_cert: %s
          sign_key: %s
          enc_cert: %s
          enc_key: %s
%s        tls: {cert: %s, key: %s}
        routes: [{upstream: %s}]
`, name, name, isDefault, d.SignCert, d.SignKey, d.EncCert, d.EncKey, extraTLCP, tc[0], tc[1], name)
}

func (f *sitesFixture) config(sites, strictSites string, upstreams ...string) string {
	var ups strings.Builder
	for _, n := range upstreams {
		fmt.Fprintf(&ups, "  %s: {targets: [%q]}\n", n, f.upstreams[n])
	}
	return `admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    sites:
` + sites + `  - name: strict
    listen: "127.0.0.1:0"
    protocol: auto
    sites:
` + strictSites + `upstreams:
` + ups.String()
}

// dialTLCP connects over TLCP with sni ("" sends none: the name checked is
// then checkName).
func (f *sitesFixture) dialTLCP(addr, sni, checkName string, cfg *tlcp.Config) (*tlcp.Conn, error) {
	if cfg == nil {
		cfg = &tlcp.Config{}
	}
	cfg.RootCAs = f.ca.Pool()
	cfg.ServerName = checkName
	if sni != "" {
		cfg.ServerName, cfg.SendServerName = sni, true
	}
	c, err := (&tlcp.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tlcp.Conn), nil
}

// request sends one request over conn and returns the status and body.
func request(t *testing.T, conn net.Conn, host, path string) (int, string) {
	t.Helper()
	code, body, err := tryRequest(conn, host, path)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

func tryRequest(conn net.Conn, host, path string) (int, string, error) {
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("http://" + host + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestServeSites runs gmgate serve with a configuration file of three
// sites on one auto port, each with its own SM2 pair and TLS
// certificate, and a second listener without a default site.
func TestServeSites(t *testing.T) {
	f := newSitesFixture(t, "api", "www", "pay", "news")
	payAuth := fmt.Sprintf("          client_auth: require_and_verify\n          client_ca: %s\n", filepath.Join(f.dir, "ca.crt"))
	sites := f.site("api", true, "") + f.site("www", false, "") + f.site("pay", false, payAuth)
	strict := f.site("www", false, "")
	cfgFile := filepath.Join(f.dir, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(f.config(sites, strict, "api", "www", "pay")), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge", "strict")
	edge, strictAddr := srv.addrs["edge"], srv.addrs["strict"]

	t.Run("sni", func(t *testing.T) {
		for _, name := range []string{"api", "www"} {
			host := name + ".example.cn"
			c, err := f.dialTLCP(edge, host, "", nil)
			if err != nil {
				t.Fatalf("TLCP %s: %v", host, err)
			}
			if got := c.ConnectionState().PeerCertificates[0].DNSNames[0]; got != host {
				t.Errorf("TLCP %s: certificate for %s", host, got)
			}
			if code, body := request(t, c, host, "/"); code != 200 || body != name+" HTTP/1.1" {
				t.Errorf("TLCP %s: %d %q", host, code, body)
			}
		}
		for _, name := range []string{"api", "www", "pay"} {
			host := name + ".example.cn"
			c, err := tls.Dial("tcp", edge, &tls.Config{RootCAs: f.tlsRoots, ServerName: host})
			if err != nil {
				t.Fatalf("TLS %s: %v", host, err)
			}
			if code, body := request(t, c, host, "/"); code != 200 || body != name+" HTTP/1.1" {
				t.Errorf("TLS %s: %d %q", host, code, body)
			}
		}
	})
	t.Run("default site without SNI", func(t *testing.T) {
		c, err := f.dialTLCP(edge, "", "api.example.cn", nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := request(t, c, "api.example.cn", "/"); code != 200 || body != "api HTTP/1.1" {
			t.Errorf("%d %q", code, body)
		}
	})
	t.Run("unrecognized_name without a default", func(t *testing.T) {
		for _, sni := range []string{"", "api.example.cn"} {
			_, err := f.dialTLCP(strictAddr, sni, "www.example.cn", nil)
			var ae *tlcp.AlertError
			if !errors.As(err, &ae) || ae.Alert != tlcp.AlertUnrecognizedName {
				t.Errorf("TLCP SNI %q: %v", sni, err)
			}
		}
		if _, err := tls.Dial("tcp", strictAddr, &tls.Config{RootCAs: f.tlsRoots, ServerName: "api.example.cn"}); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
			t.Errorf("TLS: %v", err)
		}
	})
	t.Run("client-auth site beside open ones", func(t *testing.T) {
		if _, err := f.dialTLCP(edge, "pay.example.cn", "", nil); err == nil {
			t.Error("pay served a TLCP client without a certificate")
		}
		client, err := f.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "teller-7"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.dialTLCP(edge, "pay.example.cn", "", &tlcp.Config{Certificates: []tlcp.Certificate{*client.Certificate()}})
		if err != nil {
			t.Fatal(err)
		}
		if code, body := request(t, c, "pay.example.cn", "/"); code != 200 || body != "pay HTTP/1.1" {
			t.Errorf("pay with a certificate: %d %q", code, body)
		}
	})
	t.Run("421 for a Host of another site", func(t *testing.T) {
		c, err := f.dialTLCP(edge, "api.example.cn", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := request(t, c, "pay.example.cn", "/"); code != http.StatusMisdirectedRequest || strings.Contains(body, "pay HTTP") {
			t.Errorf("%d %q", code, body)
		}
	})
	t.Run("sessions stay on their site", func(t *testing.T) {
		cache := &testsession.One[tlcp.ClientSessionState]{}
		resumed := func(sni string) bool {
			c, err := f.dialTLCP(edge, sni, "", &tlcp.Config{ClientSessionCache: cache, InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A request answered means the server's handshake, which
			// caches the session, is over.
			request(t, c, sni, "/")
			return c.ConnectionState().DidResume
		}
		if a, b, c := resumed("api.example.cn"), resumed("api.example.cn"), resumed("www.example.cn"); a || !b || c {
			t.Errorf("TLCP: resumed on api %v then %v (want false, true), on www %v", a, b, c)
		}
		tlsCache := &testsession.One[tls.ClientSessionState]{}
		tlsResumed := func(sni string) bool {
			c, err := tls.Dial("tcp", edge, &tls.Config{ServerName: sni, InsecureSkipVerify: true, ClientSessionCache: tlsCache})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The TLS 1.3 ticket comes before the response.
			request(t, c, sni, "/")
			return c.ConnectionState().DidResume
		}
		if a, b, c := tlsResumed("api.example.cn"), tlsResumed("api.example.cn"), tlsResumed("www.example.cn"); a || !b || c {
			t.Errorf("TLS: resumed on api %v then %v (want false, true), on www %v", a, b, c)
		}
	})
	t.Run("HTTP/2", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.tlsRoots, ServerName: "www.example.cn"}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+edge+"/", nil)
		req.Host = "www.example.cn"
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(b) != "www HTTP/1.1" {
			t.Errorf("%s %q", resp.Proto, b)
		}
	})
	t.Run("reload adds a site while a long request goes on", func(t *testing.T) {
		c, err := f.dialTLCP(edge, "api.example.cn", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			code int
			body string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			code, body, err := tryRequest(c, "api.example.cn", "/slow")
			done <- result{code, body, err}
		}()
		<-f.entered
		if _, err := f.dialTLCP(edge, "news.example.cn", "", nil); err == nil {
			t.Fatal("news served before it was configured")
		}
		cfg := f.config(sites+f.site("news", false, ""), strict, "api", "www", "pay", "news")
		if err := os.WriteFile(cfgFile+".tmp", []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgFile+".tmp", cfgFile); err != nil {
			t.Fatal(err)
		}
		srv.waitLog(t, "configuration reloaded")
		nc, err := f.dialTLCP(edge, "news.example.cn", "", nil)
		if err != nil {
			t.Fatalf("the added site: %v", err)
		}
		if code, body := request(t, nc, "news.example.cn", "/"); code != 200 || body != "news HTTP/1.1" {
			t.Errorf("the added site: %d %q", code, body)
		}
		select {
		case r := <-done:
			t.Fatalf("the long request ended during the reload: %d %q %v", r.code, r.body, r.err)
		default:
		}
		close(f.release)
		if r := <-done; r.err != nil || r.code != 200 || r.body != "api HTTP/1.1" {
			t.Errorf("the long request: %d %q %v", r.code, r.body, r.err)
		}
	})
}

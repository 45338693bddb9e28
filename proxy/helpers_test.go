package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/tlcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPKI is an SM2 CA with a dual certificate for localhost and an ECDSA
// CA with a TLS certificate for localhost, written to a directory.
type testPKI struct {
	dir      string
	ca       *pki.CA
	dual     pki.DualFiles
	roots    *smx509.CertPool
	tlsCert  string
	tlsKey   string
	tlsRoots *x509.CertPool
	// tlsRoot is the TLS CA's certificate file, for clients such as curl.
	tlsRoot string
}

var (
	pkiOnce   sync.Once
	sharedPKI *testPKI
	pkiErr    error
)

// getPKI makes the certificates once per test binary (SM2 key generation
// is not free) in a directory that outlives the tests that share it.
func getPKI(t testing.TB) *testPKI {
	t.Helper()
	pkiOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gmgate-proxy-test")
		if err != nil {
			pkiErr = err
			return
		}
		sharedPKI, pkiErr = newTestPKI(dir)
	})
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return sharedPKI
}

func newTestPKI(dir string) (*testPKI, error) {
	p := &testPKI{dir: dir}
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		return nil, err
	}
	p.ca = ca
	p.roots = ca.Pool()
	if err := p.issue(dir); err != nil {
		return nil, err
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		return nil, err
	}
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return nil, err
	}
	p.tlsCert, p.tlsKey, err = leaf.Write(dir, "tls", nil)
	if err != nil {
		return nil, err
	}
	p.tlsRoots = x509.NewCertPool()
	root, err := x509.ParseCertificate(leaf.Root.Raw)
	if err != nil {
		return nil, err
	}
	p.tlsRoots.AddCert(root)
	p.tlsRoot = filepath.Join(dir, "tls-root.crt")
	if err := os.WriteFile(p.tlsRoot, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// issue writes a fresh dual certificate for localhost into dir.
func (p *testPKI) issue(dir string) error {
	pair, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	files, err := pair.Write(dir, "localhost", nil)
	if err != nil {
		return err
	}
	p.dual = files
	return nil
}

// copyTo copies the dual certificate files into dir and returns their
// paths there, for tests that replace them.
func (p *testPKI) copyTo(t testing.TB, dir string) pki.DualFiles {
	t.Helper()
	out := pki.DualFileNames(dir, "localhost")
	for _, pair := range [][2]string{{p.dual.SignCert, out.SignCert}, {p.dual.SignKey, out.SignKey}, {p.dual.EncCert, out.EncCert}, {p.dual.EncKey, out.EncKey}} {
		data, err := os.ReadFile(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pair[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// testConfig is an auto listener on a free loopback port routing
// everything to upstream "app" with the given targets.
func testConfig(p *testPKI, targets ...string) *config.Config {
	cfg := &config.Config{
		Admin: config.Admin{Listen: "127.0.0.1:0"},
		Log:   config.Log{Access: "off"},
		Listeners: []config.Listener{{
			Name:     "edge",
			Listen:   "127.0.0.1:0",
			Protocol: config.ProtocolAuto,
			TLCP: &config.TLCP{
				SignCert: p.dual.SignCert, SignKey: p.dual.SignKey,
				EncCert: p.dual.EncCert, EncKey: p.dual.EncKey,
			},
			TLS:    &config.TLS{Cert: p.tlsCert, Key: p.tlsKey},
			Routes: []config.Route{{Upstream: "app"}},
			SessionHeaders: config.SessionHeaders{
				Protocol: "X-TLCP-Protocol", Suite: "X-TLCP-Suite", Resumed: "X-TLCP-Resumed",
				ClientSubject: "X-Client-Subject",
			},
		}},
		Upstreams: map[string]*config.Upstream{
			"app": {Targets: targets},
		},
	}
	config.Defaults(cfg)
	return cfg
}

// startServer starts a gateway and shuts it down when the test ends.
func startServer(t testing.TB, cfg *config.Config, access *slog.Logger) *Server {
	t.Helper()
	return startWith(t, cfg, Options{Logger: testLogger(t), AccessLog: access})
}

// startLogged starts a gateway whose process log is JSON in the returned
// buffer, and shuts it down when the test ends.
func startLogged(t testing.TB, cfg *config.Config, access *slog.Logger) (*Server, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	return startWith(t, cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), AccessLog: access}), logs
}

func startWith(t testing.TB, cfg *config.Config, opts Options) *Server {
	t.Helper()
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// tlcpClient is an HTTP client that speaks TLCP to the gateway.
func tlcpClient(t testing.TB, p *testPKI, tc *tlcp.Config) *http.Client {
	t.Helper()
	if tc == nil {
		tc = &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"}
	}
	d := &tlcp.Dialer{Config: tc}
	tr := &http.Transport{DialTLSContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// tlsClient is an HTTP client that speaks TLS 1.3 to the gateway.
func tlsClient(t testing.TB, p *testPKI) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", MinVersion: tls.VersionTLS13}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func gatewayURL(s *Server, path string) string {
	return "https://" + s.Addr("edge").String() + path
}

// mustServeTLCP fetches / from the gateway's edge listener over TLCP and
// fails the test if that does not work.
func mustServeTLCP(t testing.TB, p *testPKI, s *Server) {
	t.Helper()
	resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
}

// get fetches url and returns the response with its body read.
func get(t testing.TB, client *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scrape reads the admin /metrics endpoint.
func scrape(t testing.TB, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeAddr(t, s.AdminAddr().String())
}

// scrapeAddr reads the /metrics endpoint of the admin listener at addr.
func scrapeAddr(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := parser.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

// metricValue returns the value of the series of family name with the
// given labels (a counter or gauge, or a histogram's sample count).
func metricValue(mf map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := mf[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// hasLabels reports whether m carries each of labels.
func hasLabels(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.Label {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// edgeConfig is a configuration file with the given admin section, one
// TLCP listener "edge" on a free port and one upstream "app" at target.
func edgeConfig(p *testPKI, admin, target string) string {
	return fmt.Sprintf(`admin: %s
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp: {sign_cert: %s, sign_key: %s, enc_cert: %s, enc_key: %s}
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["%s"]}
`, admin, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, target)
}

// replaceFile puts doc in file by renaming a new file over it, as editors
// and configuration tools do.
func replaceFile(t testing.TB, file, doc string) {
	t.Helper()
	if err := os.WriteFile(file+".tmp", []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

func tempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gmgate-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Clean(d)
}

// clientHello returns the first flight of a TLCP client for localhost
// (its ClientHello records), for tests that play a client byte by byte.
func clientHello(t testing.TB, p *testPKI) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		_ = tlcp.Client(b, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"}).Handshake()
	}()
	_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, hello, err := edge.ReadClientHello(a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return hello
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// h2cUpstream serves h in HTTP/2 without TLS (prior knowledge, as gRPC
// servers speak it) until the test ends, and returns its address.
func h2cUpstream(t testing.TB, h http.Handler) string {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = &http.Protocols{}
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// records splits a handshake message into records of at most size bytes
// of the given version.
func records(version [2]byte, msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, edge.RecordTypeHandshake, version[0], version[1], byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// handshakeMessage is a handshake message of the given type with a body
// of n bytes.
func handshakeMessage(typ byte, n int) []byte {
	m := []byte{typ, byte(n >> 16), byte(n >> 8), byte(n)}
	return append(m, bytes.Repeat([]byte{0xab}, n)...)
}

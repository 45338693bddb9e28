package proxy

import (
	"crypto/x509/pkix"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// An http listener routes like any listener (a local application calling
// through gmgate), and a redirect_https one sends everything to the HTTPS
// port.
func TestHTTPListener(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners = append(cfg.Listeners,
		config.Listener{Name: "local", Listen: "127.0.0.1:0", Protocol: config.ProtocolHTTP, Routes: []config.Route{{Upstream: "app", Path: "/"}},
			SessionHeaders: config.SessionHeaders{Protocol: "X-Client-Protocol"}},
		config.Listener{Name: "port80", Listen: "127.0.0.1:0", Protocol: config.ProtocolHTTP, RedirectHTTPS: true},
	)
	var access testlog.Buffer
	s := startServer(t, cfg, slog.New(slog.NewJSONHandler(&access, nil)))

	req, _ := http.NewRequest("GET", "http://"+s.Addr("local").String()+"/orders?id=7", nil)
	req.Header.Set("User-Agent", "legacy-app/1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
		t.Fatal(err)
	}
	if e.Path != "/orders?id=7" || e.Headers.Get("X-Forwarded-Proto") != "http" || e.Headers.Get("X-Client-Protocol") != "http" ||
		!strings.HasSuffix(e.Headers.Get("Forwarded"), ";proto=http") {
		t.Errorf("forwarded: %+v", e)
	}
	// The access line names the target and the user agent.
	upHost := strings.TrimPrefix(up.URL, "http://")
	testwait.For(t, "the access line", func() bool { return strings.Contains(access.String(), `"listener":"local"`) })
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(access.String()), "\n") {
		if strings.Contains(l, `"listener":"local"`) {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line["protocol"] != "http" || line["target"] != upHost || line["user_agent"] != "legacy-app/1.0" || line["status"] != float64(201) {
		t.Errorf("access line: %v", line)
	}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirect, err := noFollow.Get("http://" + s.Addr("port80").String() + "/a/b?c=d")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, redirect)
	_, edgePort, _ := net.SplitHostPort(s.Addr("edge").String())
	if want := "https://127.0.0.1:" + edgePort + "/a/b?c=d"; redirect.StatusCode != http.StatusMovedPermanently || redirect.Header.Get("Location") != want {
		t.Errorf("redirect: %s to %q, want 301 to %q", redirect.Status, redirect.Header.Get("Location"), want)
	}
}

// Check reports what serves but deserves a word: ECDHE suites listed under
// client_auth none without client_ca, and plain HTTP forwarded on a public
// address. The default suite list, which prefers the ECC suites, is no
// cause for a warning.
func TestCheckWarnings(t *testing.T) {
	p := getPKI(t)
	var cfg *config.Config
	fresh := func() {
		cfg = testConfig(p, "http://127.0.0.1:1")
		cfg.Listeners = append(cfg.Listeners, config.Listener{Name: "plain", Listen: "0.0.0.0:0", Protocol: config.ProtocolHTTP, Routes: []config.Route{{Upstream: "app", Path: "/"}}})
	}
	fresh()
	warnings := func() []string {
		t.Helper()
		res, err := Check(cfg, CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range res.Warnings {
			got = append(got, w.String())
		}
		return got
	}
	if got := warnings(); len(got) != 1 || !strings.HasPrefix(got[0], cfg.Listeners[1].Path()+".listen: ") {
		t.Errorf("default suites: warnings %q, want the listen one alone", got)
	}
	fresh()
	// As a file that lists them: config.Defaults has run already.
	cfg.Listeners[0].TLCP.Suites = []string{"ECC_SM4_GCM_SM3", "ECDHE_SM4_GCM_SM3"}
	cfg.Listeners[0].TLCP.SuitesDefaulted = false
	got := warnings()
	if len(got) != 2 || !strings.HasPrefix(got[0], cfg.Listeners[0].Path()+".tlcp.suites: ") ||
		!strings.Contains(got[0], "GmSSL clients then cannot complete the handshake; list only the ECC suites (ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3), or set client_ca to the CAs that issue your clients' certificates") {
		t.Errorf("ECDHE listed: warnings %q", got)
	}
	cfg.Listeners[0].TLCP.ClientCA = p.dual.CACert
	cfg.Listeners[1].Listen = "127.0.0.1:0"
	if res, err := Check(cfg, CheckOptions{}); err != nil || len(res.Warnings) != 0 {
		t.Errorf("with client_ca and loopback: %v %v", res.Warnings, err)
	}
}

// With client_ca set, an ECDHE handshake under client_auth none names the
// CAs in its CertificateRequest, which GmSSL clients need to pick their
// certificates.
func TestECDHECertificateRequestNamesClientCAs(t *testing.T) {
	p := getPKI(t)
	cfg := testConfig(p, echoUpstream(t, "a").URL)
	cfg.Listeners[0].TLCP.ClientCA = p.dual.CACert
	s := startServer(t, cfg, nil)
	issued, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "client"}})
	if err != nil {
		t.Fatal(err)
	}
	pair := issued.Certificate()
	var named [][]byte
	tc := &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3},
		GetClientCertificate: func(info *tlcp.CertificateRequestInfo) (*tlcp.Certificate, error) {
			named = info.AcceptableCAs
			return pair, nil
		}}
	resp, err := tlcpClient(t, p, tc).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if len(named) != 1 || string(named[0]) != string(p.ca.Root.RawSubject) {
		t.Errorf("CertificateRequest names %q, want the client CA", named)
	}
}

// A port held by the running gmgate is free for a reload's check; one
// held by anything else is not.
func TestCheckPortHeldByRunningProcess(t *testing.T) {
	p := getPKI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(p, "http://127.0.0.1:1")
	cfg.Listeners[0].Listen = busy.Addr().String()
	if _, err := Check(cfg, CheckOptions{RunningPID: os.Getpid()}); err != nil {
		t.Errorf("a port of the running process: %v", err)
	}
	_, err = Check(cfg, CheckOptions{RunningPID: os.Getppid()})
	if err == nil || !strings.Contains(err.Error(), cfg.Listeners[0].Path()+".listen: "+busy.Addr().String()+" is already in use") {
		t.Errorf("a port of another process: %v", err)
	}
}

func TestReopenAccessLog(t *testing.T) {
	p := getPKI(t)
	dir := tempDir(t)
	cfg := testConfig(p, echoUpstream(t, "a").URL)
	cfg.Log.Access = filepath.Join(dir, "access.log")
	s, err := New(cfg, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Shutdown(t.Context())
	mustServeTLCP(t, p, s)
	if err := os.Rename(cfg.Log.Access, cfg.Log.Access+".1"); err != nil {
		t.Fatal(err)
	}
	s.ReopenLogs()
	mustServeTLCP(t, p, s)
	// Lines reach the file within accessFlushDelay.
	testwait.For(t, "the line in the new file", func() bool {
		data, _ := os.ReadFile(cfg.Log.Access)
		return len(data) > 0
	})
	for i, f := range []string{cfg.Log.Access + ".1", cfg.Log.Access} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), `"msg":"request"`); n != 1 {
			t.Errorf("file %d (%s) has %d request lines:\n%s", i, f, n, data)
		}
	}
}

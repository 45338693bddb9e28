package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testocsp"
	"github.com/gmgate/gmgate/internal/testwait"
)

// consoleFixture is gmgate serve with two sites (api and www) on one auto
// listener, where the api upstream has a second target that refuses
// connections and is ejected on its first failure. The api site checks
// TLCP client certificates against a CRL file (made by gmgate cert crl)
// and a CRL URL with credentials that does not answer; www's TLS
// certificate names an OCSP responder, whose answer gmgate staples.
type consoleFixture struct {
	f     *sitesFixture
	srv   *served
	admin string // http://host:port
	dead  string // the refusing target's URL
	// crlFile is api's CRL file; crlURL its CRL URL as configured (with
	// user information and a query) and as shown (without).
	crlFile, crlURL, crlURLShown string
}

// Secrets in the configured CRL URL, which no answer may show.
const crlURLUser, crlURLPassword, crlURLToken = "crlreader", "pa55word-crl", "s3cret-crl-token"

func startConsoleFixture(t *testing.T, adminYAML string) *consoleFixture {
	t.Helper()
	f := newSitesFixture(t, "api", "www")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	mustGmgate(t, f.dir, "cert", "crl", "--ca", ".")
	crls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(crls.Close)
	c := &consoleFixture{f: f, dead: dead, crlFile: filepath.Join(f.dir, "crl.pem"), crlURLShown: crls.URL + "/clients.crl"}
	c.crlURL = strings.Replace(crls.URL, "http://", "http://"+crlURLUser+":"+crlURLPassword+"@", 1) + "/clients.crl?token=" + crlURLToken
	revocation := fmt.Sprintf(`          client_auth: verify_if_given
          client_ca: %s
          client_revocation: {crl: [%q, %q], ocsp: aia, policy: fail_open}
`, filepath.Join(f.dir, "ca.crt"), c.crlFile, c.crlURL)
	// www's TLS certificate names a responder: stapled.
	ocspCA := testocsp.New(t)
	leaf := ocspCA.Issue(t, "www.example.cn")
	wwwCert, wwwKey := filepath.Join(f.dir, "www-ocsp.crt"), filepath.Join(f.dir, "www-ocsp.key")
	if err := os.WriteFile(wwwCert, leaf.ChainPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wwwKey, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	f.tlsFiles["www"] = [2]string{wwwCert, wwwKey}
	f.tlsRoots.AddCert(ocspCA.Cert)
	cfg := fmt.Sprintf(`admin: %s
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    sites:
%s%supstreams:
  api:
    targets: [%q, %q]
    policy: round_robin
    health: {disabled: true}
    passive: {max_fails: 1, eject_for: 10m, panic_threshold: 0}
  www: {targets: [%q]}
`, adminYAML, f.site("api", true, revocation), f.site("www", false, ""), f.upstreams["api"], dead, f.upstreams["www"])
	file := filepath.Join(f.dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.srv = startServe(t, gmgateCommand("serve", "-c", file), "edge")
	c.admin = "http://" + c.srv.admin
	return c
}

// traffic makes tlcp TLCP and tls TLS connections to site, one request
// on each.
func (c *consoleFixture) traffic(t *testing.T, site string, tlcpConns, tlsConns int) {
	t.Helper()
	host := site + ".example.cn"
	edge := c.srv.addrs["edge"]
	for range tlcpConns {
		conn, err := c.f.dialTLCP(edge, host, "", nil)
		if err != nil {
			t.Fatalf("TLCP %s: %v", host, err)
		}
		if code, _ := request(t, conn, host, "/"); code != 200 {
			t.Fatalf("TLCP %s: %d", host, code)
		}
	}
	for range tlsConns {
		conn, err := tls.Dial("tcp", edge, &tls.Config{RootCAs: c.f.tlsRoots, ServerName: host})
		if err != nil {
			t.Fatalf("TLS %s: %v", host, err)
		}
		if code, _ := request(t, conn, host, "/"); code != 200 {
			t.Fatalf("TLS %s: %d", host, code)
		}
	}
}

// get fetches an admin path with token ("" for none).
func (c *consoleFixture) get(t *testing.T, method, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (c *consoleFixture) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, b := c.get(t, "GET", path, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// targetState returns the admin API's state of the api upstream's target
// url.
func (c *consoleFixture) targetState(t *testing.T, url string) string {
	var ups struct {
		Upstreams []struct {
			Name    string `json:"name"`
			Targets []struct {
				URL   string `json:"url"`
				State string `json:"state"`
			} `json:"targets"`
		} `json:"upstreams"`
	}
	c.getJSON(t, "/api/v1/upstreams", &ups)
	for _, u := range ups.Upstreams {
		for _, tg := range u.Targets {
			if u.Name == "api" && tg.URL == url {
				return tg.State
			}
		}
	}
	return ""
}

// TestAdminConsole runs gmgate serve with two sites, sends TLCP and TLS
// traffic, and checks the admin API, the Grafana dashboard against
// /metrics, and the console in headless Chromium.
func TestAdminConsole(t *testing.T) {
	c := startConsoleFixture(t, `{listen: "127.0.0.1:0"}`)
	// api: 3 TLCP, 1 TLS (75% GM); www: 1 TLCP, 2 TLS (33.3%).
	c.traffic(t, "api", 3, 1)
	c.traffic(t, "www", 1, 2)
	// A failed handshake, for the failures view and the dashboard's
	// failure panel.
	if _, err := c.f.dialTLCP(c.srv.addrs["edge"], "api.example.cn", "", nil); err != nil {
		t.Fatal(err)
	}
	bad, err := net.Dial("tcp", c.srv.addrs["edge"])
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bad.Write([]byte("\x16\x01\x01\x00\x02\x01\x00"))
	_, _ = io.Copy(io.Discard, bad)
	bad.Close()
	testwait.For(t, "the refusing api target to be ejected", func() bool {
		if c.targetState(t, c.dead) == "ejected" {
			return true
		}
		c.traffic(t, "api", 1, 0)
		return false
	})

	var mv struct {
		Sites []struct {
			Site    string `json:"site"`
			Windows []struct {
				Minutes     int     `json:"minutes"`
				Connections int     `json:"connections"`
				GMShare     float64 `json:"gm_share"`
			} `json:"windows"`
		} `json:"sites"`
	}
	c.getJSON(t, "/api/v1/migration", &mv)
	// The 15-minute window holds all of the test's traffic wherever the
	// clock stands; the last minute's may have lost its beginning.
	shares := map[string]float64{}
	for _, s := range mv.Sites {
		if len(s.Windows) != 3 || s.Windows[1].Minutes != 15 {
			t.Fatalf("site %s: windows %+v", s.Site, s.Windows)
		}
		shares[s.Site] = s.Windows[1].GMShare
		if s.Windows[1].Connections == 0 || s.Windows[2].Connections != s.Windows[1].Connections {
			t.Errorf("site %s: connections in the windows: %+v", s.Site, s.Windows)
		}
	}
	if len(shares) != 2 || shares["api"] <= 0.75 || shares["api"] >= 1 || fmt.Sprintf("%.3f", shares["www"]) != "0.333" {
		t.Fatalf("GM shares: %v", shares)
	}

	// The www TLS certificate's OCSP answer is stapled.
	var cs certificatesAnswer
	testwait.For(t, "www's OCSP staple", func() bool {
		c.getJSON(t, "/api/v1/certificates", &cs)
		for _, x := range cs.Certificates {
			if x.Source == "edge/www" && x.Role == "tls" {
				return x.Revocation == "good"
			}
		}
		return false
	})
	checkRevocationAnswer(t, c, cs)
	roles := map[string]bool{}
	for _, x := range cs.Certificates {
		roles[x.Role] = true
		if x.DaysLeft < 0 { // www's OCSP test certificate lasts 12 hours
			t.Errorf("certificate %s %s: %d days left", x.Source, x.Role, x.DaysLeft)
		}
	}
	if len(cs.Certificates) != 6 || !roles["sign"] || !roles["enc"] || !roles["tls"] {
		t.Fatalf("certificates: %+v", cs.Certificates)
	}

	t.Run("api views", func(t *testing.T) {
		var ls struct {
			Listeners []struct {
				Name, Listen, Protocol string
				Sites                  []struct {
					Name      string   `json:"name"`
					Protocols []string `json:"protocols"`
				}
			}
		}
		c.getJSON(t, "/api/v1/listeners", &ls)
		if len(ls.Listeners) != 1 || ls.Listeners[0].Listen != c.srv.addrs["edge"] || len(ls.Listeners[0].Sites) != 2 ||
			ls.Listeners[0].Sites[1].Name != "www" || strings.Join(ls.Listeners[0].Sites[1].Protocols, ",") != "tlcp,tls" {
			t.Errorf("listeners: %+v", ls)
		}
		var fl struct {
			Failures []struct{ Listener, Protocol, Result, Cause string }
			Total    int
		}
		c.getJSON(t, "/api/v1/handshakes/failures", &fl)
		if fl.Total < 1 || fl.Failures[0].Listener != "edge" || fl.Failures[0].Protocol != "tlcp" || fl.Failures[0].Result == "" || fl.Failures[0].Cause == "" {
			t.Errorf("failures: %+v", fl)
		}
		var sess struct {
			Caches []struct {
				Source string
				Size   int
			}
			Resumption map[string]map[string]float64
		}
		c.getJSON(t, "/api/v1/sessions", &sess)
		if len(sess.Caches) != 2 || sess.Caches[0].Source != "edge/api" || sess.Caches[1].Source != "edge/www" || sess.Caches[0].Size <= 0 {
			t.Errorf("sessions: %+v", sess)
		}
		var acc struct {
			Backends []struct {
				Backend string
				Ops     map[string]map[string]float64
			}
		}
		c.getJSON(t, "/api/v1/accel", &acc)
		if len(acc.Backends) == 0 || acc.Backends[0].Ops["sign"]["ok"] < 1 {
			t.Errorf("accel: %+v", acc)
		}
		var cfg struct {
			Generation int    `json:"generation"`
			File       string `json:"file"`
		}
		c.getJSON(t, "/api/v1/config", &cfg)
		if cfg.Generation != 1 || !strings.HasSuffix(cfg.File, "gmgate.yaml") {
			t.Errorf("config: %+v", cfg)
		}
	})
	t.Run("grafana dashboard", func(t *testing.T) {
		checkDashboard(t, c)
	})
	t.Run("browser", func(t *testing.T) {
		checkConsoleInBrowser(t, c, shares, cs.Certificates, cs.Checks)
	})
}

type consoleCert struct {
	Source     string `json:"source"`
	Role       string `json:"role"`
	DaysLeft   int    `json:"days_left"`
	KeyType    string `json:"key_type"`
	Revocation string `json:"revocation"`
	OCSPStaple *struct {
		State      string     `json:"state"`
		NextUpdate *time.Time `json:"next_update"`
		Responder  string     `json:"responder"`
	} `json:"ocsp_staple"`
}

type consoleRevocationCheck struct {
	Scope   string `json:"scope"`
	Checks  string `json:"checks"`
	Policy  string `json:"policy"`
	Sources []struct {
		Kind       string     `json:"kind"`
		Source     string     `json:"source"`
		State      string     `json:"state"`
		NextUpdate *time.Time `json:"next_update"`
		Revoked    *int       `json:"revoked"`
		LastFetch  *time.Time `json:"last_fetch"`
		LastError  string     `json:"last_error"`
	} `json:"sources"`
}

type certificatesAnswer struct {
	Certificates []consoleCert            `json:"certificates"`
	Checks       []consoleRevocationCheck `json:"revocation_checks"`
}

// checkRevocationAnswer: the certificates endpoint shows www's stapled
// OCSP answer, and api's revocation sources with their state, without
// the CRL URL's credentials.
func checkRevocationAnswer(t *testing.T, c *consoleFixture, cs certificatesAnswer) {
	t.Helper()
	for _, x := range cs.Certificates {
		stapled := x.Source == "edge/www" && x.Role == "tls"
		if stapled && (x.OCSPStaple == nil || x.OCSPStaple.State != "good" || x.OCSPStaple.NextUpdate == nil || !x.OCSPStaple.NextUpdate.After(time.Now()) ||
			!strings.HasSuffix(x.OCSPStaple.Responder, "/ocsp")) {
			t.Errorf("www's TLS certificate: %+v %+v", x, x.OCSPStaple)
		}
		if !stapled && (x.Revocation != "not_checked" || x.OCSPStaple != nil) {
			t.Errorf("a certificate without a responder: %+v", x)
		}
	}
	if len(cs.Checks) != 1 || cs.Checks[0].Scope != "edge/api/tlcp" || cs.Checks[0].Checks != "client" || cs.Checks[0].Policy != "fail_open" || len(cs.Checks[0].Sources) != 3 {
		t.Fatalf("revocation checks: %+v", cs.Checks)
	}
	file, url, ocsp := cs.Checks[0].Sources[0], cs.Checks[0].Sources[1], cs.Checks[0].Sources[2]
	if file.Kind != "crl" || file.Source != c.crlFile || file.State != "ok" || file.Revoked == nil || *file.Revoked != 0 ||
		file.NextUpdate == nil || !file.NextUpdate.After(time.Now()) || file.LastFetch == nil || file.LastError != "" {
		t.Errorf("CRL file: %+v", file)
	}
	if url.Kind != "crl" || url.Source != c.crlURLShown || url.State != "expired" || url.NextUpdate != nil || url.LastFetch == nil || !strings.Contains(url.LastError, "503") {
		t.Errorf("CRL URL that does not answer: %+v", url)
	}
	if ocsp.Kind != "ocsp" || ocsp.Source != "aia" || ocsp.State != "not_asked" {
		t.Errorf("OCSP from the certificates' AIA, not asked yet: %+v", ocsp)
	}
	_, body := c.get(t, "GET", "/api/v1/certificates", "")
	for _, secret := range []string{crlURLUser, crlURLPassword, crlURLToken} {
		if bytes.Contains(body, []byte(secret)) {
			t.Errorf("the certificates answer shows %q of the CRL URL", secret)
		}
	}
}

// dashboardExprs returns every PromQL expression of the dashboard file.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s is not valid dashboard JSON: %v", path, err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if dash.Title == "" || len(exprs) == 0 {
		t.Fatalf("%s: no title or no query", path)
	}
	return exprs
}

// metricName matches the metric names of PromQL expressions: the
// gateway's, the process's and Go's.
var metricName = regexp.MustCompile(`\b(gmgate|process|go)_[a-zA-Z0-9_]+`)

// checkDashboard: every metric the Grafana dashboard names is one that
// /metrics serves, with its series present after the test's traffic.
func checkDashboard(t *testing.T, c *consoleFixture) {
	exprs := dashboardExprs(t, filepath.Join("..", "..", "deploy", "grafana", "gmgate-dashboard.json"))
	code, body := c.get(t, "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	served := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		served[name] = true
	}
	var names []string
	for _, e := range exprs {
		names = append(names, metricName.FindAllString(e, -1)...)
	}
	sort.Strings(names)
	names = slicesCompact(names)
	for _, n := range names {
		if !served[n] {
			t.Errorf("the dashboard names %s, which /metrics does not serve", n)
		}
	}
	t.Logf("dashboard metrics, all served: %s", strings.Join(names, ", "))
	if len(names) < 6 {
		t.Errorf("only %d metric names found in the dashboard: %v", len(names), names)
	}
}

func slicesCompact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// chk0CRLNext is the first scope's first CRL's nextUpdate as the console
// writes it.
func chk0CRLNext(checks []consoleRevocationCheck) string {
	if len(checks) == 0 || len(checks[0].Sources) == 0 || checks[0].Sources[0].NextUpdate == nil {
		return "(none)"
	}
	return checks[0].Sources[0].NextUpdate.UTC().Format("2006-01-02 15:04")
}

// chromiumBinary finds a Chromium to drive, or skips the test, or fails
// it when GMGATE_REQUIRE_BROWSER=1 (CI installs Debian's chromium).
func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GMGATE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium binary found and GMGATE_REQUIRE_BROWSER=1: install it (apt-get install -y chromium)")
	}
	t.Skip("no chromium binary found (apt-get install -y chromium); the console is not tested in a browser")
	return ""
}

// chromium runs headless Chromium with args and the page at url.
func chromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + profile, "--virtual-time-budget=5000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return out
}

// checkConsoleInBrowser loads the console in headless Chromium: the page
// must show each site's GM share, each certificate's days left and the
// ejected target as ejected. It saves a screenshot and prints its path.
func checkConsoleInBrowser(t *testing.T, c *consoleFixture, shares map[string]float64, certs []consoleCert, checks []consoleRevocationCheck) {
	bin := chromiumBinary(t)
	url := c.admin + "/console/"
	dom := string(chromium(t, bin, url, "--dump-dom"))
	if !strings.Contains(dom, `data-loaded="1"`) {
		t.Fatalf("the console did not finish loading:\n%s", dom)
	}
	for site, share := range shares {
		want := fmt.Sprintf(`data-site="%s" data-minutes="15">%.1f%%</span>`, site, 100*share)
		if !strings.Contains(dom, want) {
			t.Errorf("the console does not show site %s's GM share %.1f%%", site, 100*share)
		}
	}
	for _, cert := range certs {
		want := fmt.Sprintf(`data-source="%s" data-role="%s">%d days left</span>`, cert.Source, cert.Role, cert.DaysLeft)
		if !strings.Contains(dom, want) {
			t.Errorf("the console does not show %s %s with %d days left", cert.Source, cert.Role, cert.DaysLeft)
		}
	}
	if want := `data-target="` + c.dead + `">ejected</span>`; !strings.Contains(dom, want) {
		t.Errorf("the console does not show the target %s as ejected", c.dead)
	}
	for _, cert := range certs {
		want := fmt.Sprintf(`data-source="%s" data-role="%s">not checked</span>`, cert.Source, cert.Role)
		if cert.OCSPStaple != nil {
			want = fmt.Sprintf(`data-source="%s" data-role="%s">OCSP %s until %s</span>`, cert.Source, cert.Role, cert.OCSPStaple.State,
				cert.OCSPStaple.NextUpdate.UTC().Format("2006-01-02 15:04"))
		}
		if !strings.Contains(dom, want) {
			t.Errorf("the console does not show %s %s's revocation state: %s", cert.Source, cert.Role, want)
		}
	}
	for _, chk := range checks {
		for _, src := range chk.Sources {
			want := fmt.Sprintf(`data-scope="%s" data-source="%s">%s</span>`, chk.Scope, src.Source, src.State)
			if !strings.Contains(dom, want) {
				t.Errorf("the console does not show %s's %s source %s as %s", chk.Scope, src.Kind, src.Source, src.State)
			}
		}
	}
	if want := fmt.Sprintf("0 revoked, next update %s", chk0CRLNext(checks)); !strings.Contains(dom, want) {
		t.Errorf("the console does not show the CRL's next update: %s", want)
	}
	for _, secret := range []string{crlURLUser, crlURLPassword, crlURLToken} {
		if strings.Contains(dom, secret) {
			t.Errorf("the console shows %q of the CRL URL", secret)
		}
	}
	if t.Failed() {
		t.Logf("console DOM:\n%s", dom)
	}

	// The screenshot outlives the test's temporary directory: it is the
	// CI's artefact.
	dir, err := os.MkdirTemp("", "gmgate-console-")
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "console.png")
	chromium(t, bin, url, "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no PNG screenshot at %s: %v", shot, err)
	}
	t.Logf("console screenshot: %s (%d bytes)", shot, len(png))
	if dst := os.Getenv("GMGATE_CONSOLE_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

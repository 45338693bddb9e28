package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testsession"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// siteCerts are a dual certificate and a TLS certificate for each of a
// few site names, from the shared SM2 CA and one ECDSA CA.
type siteCerts struct {
	dual     map[string]pki.DualFiles
	tls      map[string][2]string // cert, key
	tlsRoots *x509.CertPool
}

var (
	siteCertsOnce sync.Once
	sharedSites   *siteCerts
	siteCertsErr  error
)

// siteNames are the sites of the multi-site tests; each answers for
// NAME.example.cn.
var siteNames = []string{"api", "www", "pay"}

func getSiteCerts(t testing.TB) *siteCerts {
	t.Helper()
	p := getPKI(t)
	siteCertsOnce.Do(func() {
		sc := &siteCerts{dual: map[string]pki.DualFiles{}, tls: map[string][2]string{}, tlsRoots: x509.NewCertPool()}
		tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
		if err != nil {
			siteCertsErr = err
			return
		}
		for _, name := range siteNames {
			host := name + ".example.cn"
			pair, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{host, "*." + host}})
			if err != nil {
				siteCertsErr = err
				return
			}
			if sc.dual[name], err = pair.Write(p.dir, "site-"+name, nil); err != nil {
				siteCertsErr = err
				return
			}
			leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{host, "*." + host}})
			if err != nil {
				siteCertsErr = err
				return
			}
			c, k, err := leaf.Write(p.dir, "site-"+name+"-tls", nil)
			if err != nil {
				siteCertsErr = err
				return
			}
			sc.tls[name] = [2]string{c, k}
			if name == siteNames[0] {
				root, _ := x509.ParseCertificate(leaf.Root.Raw)
				sc.tlsRoots.AddCert(root)
			}
		}
		sharedSites = sc
	})
	if siteCertsErr != nil {
		t.Fatal(siteCertsErr)
	}
	return sharedSites
}

// siteConfig is an auto listener with a site for each name, each routed
// to the upstream of its name; the first site is the default when
// withDefault, and pay requires a verified TLCP client certificate.
func siteConfig(t testing.TB, withDefault bool, upstreams map[string]string) *config.Config {
	p := getPKI(t)
	sc := getSiteCerts(t)
	cfg := &config.Config{
		Admin:     config.Admin{Listen: "127.0.0.1:0"},
		Log:       config.Log{Access: "off"},
		Upstreams: map[string]*config.Upstream{},
	}
	l := config.Listener{Name: "edge", Listen: "127.0.0.1:0", Protocol: config.ProtocolAuto,
		SessionHeaders: config.SessionHeaders{Resumed: "X-TLCP-Resumed"}}
	for i, name := range siteNames {
		d, tc := sc.dual[name], sc.tls[name]
		site := config.Site{
			Name:    name,
			Hosts:   []string{name + ".example.cn", "*." + name + ".example.cn"},
			Default: withDefault && i == 0,
			TLCP:    &config.TLCP{SignCert: d.SignCert, SignKey: d.SignKey, EncCert: d.EncCert, EncKey: d.EncKey},
			TLS:     &config.TLS{Cert: tc[0], Key: tc[1]},
			Routes:  []config.Route{{Upstream: name}},
		}
		if name == "pay" {
			site.TLCP.ClientAuth = "require_and_verify"
			site.TLCP.ClientCA = p.dual.CACert
		}
		l.Sites = append(l.Sites, site)
		cfg.Upstreams[name] = &config.Upstream{Targets: []string{upstreams[name]}}
	}
	cfg.Listeners = []config.Listener{l}
	config.Defaults(cfg)
	return cfg
}

func siteUpstreams(t testing.TB) map[string]string {
	out := map[string]string{}
	for _, name := range siteNames {
		out[name] = echoUpstream(t, name).URL
	}
	return out
}

// dialSite makes a TLCP (or TLS) connection to the gateway for the server
// name sni ("" sends none) and returns it with the name its certificate
// was issued for.
func dialTLCPSite(t testing.TB, s *Server, sni string, tc *tlcp.Config) (*tlcp.Conn, error) {
	t.Helper()
	if tc == nil {
		tc = &tlcp.Config{}
	}
	tc.RootCAs = getPKI(t).roots
	if sni != "" {
		tc.ServerName, tc.SendServerName = sni, true
	} else {
		// Without SNI the client still checks a name: the default
		// site's.
		tc.ServerName = "api.example.cn"
	}
	d := &tlcp.Dialer{Config: tc, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
	c, err := d.DialContext(context.Background(), "tcp", s.Addr("edge").String())
	if err != nil {
		return nil, err
	}
	return c.(*tlcp.Conn), nil
}

// siteGet sends GET / with Host over conn and returns the response and
// the upstream that answered.
func siteGet(t testing.TB, conn net.Conn, host string) (*http.Response, string) {
	t.Helper()
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp, resp.Header.Get("X-Upstream")
}

func TestSitesBySNI(t *testing.T) {
	p := getPKI(t)
	sc := getSiteCerts(t)
	var access testlog.Buffer
	s := startServer(t, siteConfig(t, true, siteUpstreams(t)), slog.New(slog.NewJSONHandler(&access, nil)))
	teller, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "teller-7"}})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		sni, host, want string
		cert            *tlcp.Certificate
	}{
		{"api.example.cn", "api.example.cn", "api", nil},
		{"www.example.cn", "www.example.cn", "www", nil},
		{"img.www.example.cn", "img.www.example.cn", "www", nil},
		{"WWW.Example.CN", "www.example.cn:443", "www", nil},
		{"pay.example.cn", "pay.example.cn", "pay", teller.Certificate()},
		// No SNI: the default site.
		{"", "api.example.cn", "api", nil},
		{"", "10.0.0.1", "api", nil},
		// A host no site lists, on the default site's connection: the
		// default site serves it.
		{"api.example.cn", "other.example.org", "api", nil},
	} {
		t.Run("tlcp/"+tc.sni, func(t *testing.T) {
			cfg := &tlcp.Config{}
			if tc.cert != nil {
				cfg.Certificates = []tlcp.Certificate{*tc.cert}
			}
			conn, err := dialTLCPSite(t, s, tc.sni, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := conn.ConnectionState().PeerCertificates[0].DNSNames[0]; got != tc.want+".example.cn" {
				t.Errorf("certificate for %s, want %s's", got, tc.want)
			}
			resp, up := siteGet(t, conn, tc.host)
			if resp.StatusCode != http.StatusCreated || up != tc.want {
				t.Errorf("status %d from upstream %q, want 201 from %s", resp.StatusCode, up, tc.want)
			}
		})
	}
	for _, name := range siteNames {
		t.Run("tls/"+name, func(t *testing.T) {
			host := "x." + name + ".example.cn"
			conn, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: sc.tlsRoots, ServerName: host})
			if err != nil {
				t.Fatal(err)
			}
			if got := conn.ConnectionState().PeerCertificates[0].DNSNames[0]; got != name+".example.cn" {
				t.Errorf("certificate for %s, want %s's", got, name)
			}
			if resp, up := siteGet(t, conn, host); resp.StatusCode != http.StatusCreated || up != name {
				t.Errorf("status %d from %q", resp.StatusCode, up)
			}
		})
	}

	// The client-authentication site refuses a client without a
	// certificate, while its neighbours take it.
	if _, err := dialTLCPSite(t, s, "pay.example.cn", nil); err == nil {
		t.Error("pay: a TLCP client without a certificate was served")
	}

	// A Host naming another site than the handshake's: 421, and no
	// upstream sees the request.
	for _, tc := range []struct{ sni, host string }{
		{"api.example.cn", "pay.example.cn"},
		{"", "pay.example.cn"},
		{"www.example.cn", "api.example.cn"},
		// A host no site lists, on another site's connection than the
		// default's.
		{"www.example.cn", "other.example.org"},
		{"www.example.cn", "10.0.0.1"},
	} {
		conn, err := dialTLCPSite(t, s, tc.sni, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, up := siteGet(t, conn, tc.host); resp.StatusCode != http.StatusMisdirectedRequest || up != "" {
			t.Errorf("SNI %q, Host %s: status %d from %q, want 421", tc.sni, tc.host, resp.StatusCode, up)
		}
	}
	conn, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: sc.tlsRoots, ServerName: "www.example.cn"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := siteGet(t, conn, "pay.example.cn"); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("TLS: status %d, want 421", resp.StatusCode)
	}

	// The site is in the metrics and the access log.
	mf := scrape(t, s)
	if v, _ := metricValue(mf, "gmgate_handshakes_total", map[string]string{"site": "www", "protocol": "tlcp", "result": "ok"}); v < 3 {
		t.Errorf("handshakes of site www over TLCP: %v", v)
	}
	if v, _ := metricValue(mf, "gmgate_request_duration_seconds", map[string]string{"listener": "edge", "site": "pay", "http_version": "1.1"}); v != 2 {
		t.Errorf("requests of site pay: %v, want 2 (TLCP and TLS)", v)
	}
	testwait.For(t, "access lines", func() bool { return strings.Contains(access.String(), `"status":421`) })
	if !strings.Contains(access.String(), `"site":"pay"`) || !strings.Contains(access.String(), `"http":"HTTP/1.1"`) {
		t.Errorf("access log lacks the site or the HTTP version:\n%s", access.String())
	}
}

// Without a default site, a name no site serves, or none, is refused
// with unrecognized_name on both protocols.
func TestSitesUnrecognizedName(t *testing.T) {
	sc := getSiteCerts(t)
	s, logs := startLogged(t, siteConfig(t, false, siteUpstreams(t)), nil)
	for _, sni := range []string{"", "other.example.com"} {
		_, err := dialTLCPSite(t, s, sni, nil)
		var ae *tlcp.AlertError
		if !errors.As(err, &ae) || !ae.Remote || ae.Alert != tlcp.AlertUnrecognizedName {
			t.Errorf("TLCP, SNI %q: %v, want the unrecognized_name alert", sni, err)
		}
		cfg := &tls.Config{RootCAs: sc.tlsRoots, ServerName: sni, InsecureSkipVerify: sni == ""}
		if _, err := tls.Dial("tcp", s.Addr("edge").String(), cfg); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
			t.Errorf("TLS, SNI %q: %v, want the unrecognized_name alert", sni, err)
		}
	}
	testwait.For(t, "the refusals in the metrics", func() bool {
		mf := scrape(t, s)
		a, _ := metricValue(mf, "gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "result": "alert_sent_unrecognized_name"})
		b, _ := metricValue(mf, "gmgate_handshakes_total", map[string]string{"protocol": "tls", "result": "alert_sent_unrecognized_name"})
		return a == 2 && b == 2
	})
	if !strings.Contains(logs.String(), `no site serves \"other.example.com\"`) {
		t.Errorf("the log does not name the refused name:\n%s", logs)
	}
}

// A session made on one site resumes there and nowhere else, over TLCP
// and TLS (1.2 tickets and 1.3 PSKs).
func TestSitesSessionsStayOnTheirSite(t *testing.T) {
	s := startServer(t, siteConfig(t, true, siteUpstreams(t)), nil)
	resumedTLCP := func(cache tlcp.ClientSessionCache, sni string) bool {
		t.Helper()
		conn, err := dialTLCPSite(t, s, sni, &tlcp.Config{ClientSessionCache: cache, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A request answered means the server's handshake, which caches
		// the session, is over.
		siteGet(t, conn, sni)
		return conn.ConnectionState().DidResume
	}
	cache := &testsession.One[tlcp.ClientSessionState]{}
	if resumedTLCP(cache, "api.example.cn") || !resumedTLCP(cache, "api.example.cn") {
		t.Fatal("TLCP: the session does not resume on its own site")
	}
	if resumedTLCP(cache, "www.example.cn") {
		t.Error("TLCP: a session of site api resumed on site www")
	}

	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cache := &testsession.One[tls.ClientSessionState]{}
		resumed := func(sni string) bool {
			t.Helper()
			conn, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{ServerName: sni, InsecureSkipVerify: true,
				MinVersion: version, MaxVersion: version, ClientSessionCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A TLS 1.3 ticket comes before the response.
			siteGet(t, conn, sni)
			return conn.ConnectionState().DidResume
		}
		name := fmt.Sprintf("TLS %x", version)
		if resumed("api.example.cn") || !resumed("api.example.cn") {
			t.Fatalf("%s: the session does not resume on its own site", name)
		}
		if resumed("www.example.cn") {
			t.Errorf("%s: a session of site api resumed on site www", name)
		}
	}
}

// config check warns once per listener about the ECDHE suites listed
// under client_auth none without client_ca, naming the sites; about a
// listener whose sites have no default, which refuses every client that
// sends no SNI; and about an IP address in hosts, which never arrives as
// SNI.
func TestSitesCheckWarnsWhatClientsTripOver(t *testing.T) {
	cfg := siteConfig(t, true, siteUpstreams(t))
	has := func(res *CheckResult, path, text string) bool {
		for _, w := range res.Warnings {
			if w.Path == path && strings.Contains(w.String(), text) {
				return true
			}
		}
		return false
	}
	res, err := Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w.Msg, "ECDHE") || strings.Contains(w.Msg, "default") || strings.Contains(w.Msg, "IP address") {
			t.Errorf("a plain site configuration warns: %s", w)
		}
	}
	cfg = siteConfig(t, true, siteUpstreams(t))
	ss := cfg.Listeners[0].Sites
	ecdhe := 0
	for j := range ss {
		if tc := ss[j].TLCP; tc != nil && (tc.ClientAuth == "none" || tc.ClientAuth == "") && tc.ClientCA == "" {
			tc.Suites, tc.SuitesDefaulted = []string{"ECC_SM4_CBC_SM3", "ECDHE_SM4_CBC_SM3"}, false
			ecdhe++
		}
	}
	defaultAt := -1
	for j := range ss {
		if ss[j].Default {
			defaultAt = j
			ss[j].Default = false
		}
	}
	if defaultAt < 0 {
		t.Fatal("the test configuration has no default site")
	}
	ss[0].Hosts = append(ss[0].Hosts, "10.0.0.5")
	res, err = Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w.Msg, "ECDHE") {
			n++
		}
	}
	if ecdhe == 0 || n != 1 {
		t.Errorf("%d sites list ECDHE under client_auth none: %d ECDHE warnings, want 1: %v", ecdhe, n, res.Warnings)
	}
	if !has(res, cfg.Listeners[0].Path()+".sites", "no site is the default") {
		t.Errorf("no warning about the missing default site: %v", res.Warnings)
	}
	if !has(res, fmt.Sprintf("%s.hosts[%d]", ss[0].Path(), len(ss[0].Hosts)-1), "10.0.0.5 is an IP address, which never arrives as a server name (SNI)") {
		t.Errorf("no warning about the IP address in hosts: %v", res.Warnings)
	}
}

// config check loads every site's certificates as serve does, names a
// site's field in what it finds, and warns of an exact name of one site
// under another's wildcard.
func TestSitesCheck(t *testing.T) {
	cfg := siteConfig(t, true, siteUpstreams(t))
	ss := cfg.Listeners[0].Sites
	ss[0].Hosts = append(ss[0].Hosts, "img.www.example.cn")
	res, err := Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range res.Warnings {
		if w.Path == ss[0].Path()+".hosts[2]" && strings.Contains(w.Msg, `under "*.www.example.cn" of `+strings.TrimPrefix(ss[1].Path(), cfg.Listeners[0].Path()+".")+` (www)`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no overlap warning: %v", res.Warnings)
	}
	ss[2].TLS.Cert = ss[2].TLS.Cert + ".missing"
	ss[1].TLCP.ClientCA = ss[1].TLCP.SignCert + ".missing"
	ss[1].TLCP.ClientAuth = "verify_if_given"
	_, err = Check(cfg, CheckOptions{Offline: true})
	for _, want := range []string{ss[2].Path() + ".tls.cert", ss[1].Path() + ".tlcp.client_ca"} {
		if err == nil || !strings.Contains(err.Error(), want+":") {
			t.Errorf("check: %v, want a problem at %s", err, want)
		}
	}
}

// config check (and serve, which logs the same warnings) warns of a
// site's host that its own certificates do not name: the TLCP signing
// certificate, the TLS certificate, or the domains of its ACME
// certificate. A wildcard certificate names one label below it; a
// wildcard host needs the same wildcard. A plain configuration, whose
// certificates name every host, does not warn.
func TestSitesCheckWarnsOfHostsTheCertificatesDoNotName(t *testing.T) {
	uncovered := func(res *CheckResult) map[string]string {
		out := map[string]string{}
		for _, w := range res.Warnings {
			if strings.Contains(w.Msg, "is not named by") {
				out[w.Path] = w.String()
			}
		}
		return out
	}
	cfg := siteConfig(t, true, siteUpstreams(t))
	res, err := Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := uncovered(res); len(got) != 0 {
		t.Errorf("a configuration whose certificates name every host warns: %v", got)
	}

	cfg = siteConfig(t, true, siteUpstreams(t))
	ss := cfg.Listeners[0].Sites
	api, www := &ss[0], &ss[1]
	// api is given www's certificates (issued for www.example.cn and
	// *.www.example.cn) and lists a name under www's wildcard, one a
	// label deeper, and its own two.
	api.TLCP.SignCert, api.TLCP.SignKey, api.TLCP.EncCert, api.TLCP.EncKey = www.TLCP.SignCert, www.TLCP.SignKey, www.TLCP.EncCert, www.TLCP.EncKey
	api.TLS.Cert, api.TLS.Key = www.TLS.Cert, www.TLS.Key
	api.Hosts = []string{"api.example.cn", "*.api.example.cn", "img.www.example.cn", "a.img.www.example.cn"}
	// www gets its TLS certificate from ACME, for www.example.cn alone.
	cfg.StateDir = t.TempDir()
	www.TLS.Cert, www.TLS.Key = "", ""
	www.TLS.ACME = &config.ACME{Domains: []string{"www.example.cn"}, CA: "https://127.0.0.1:1/directory", KeyType: "p256", Challenges: []string{config.ChallengeTLSALPN01}}
	res, err = Check(cfg, CheckOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	got := uncovered(res)
	for path, want := range map[string][]string{
		api.Path() + ".hosts[0]": {`"api.example.cn" is not named by the TLCP signing certificate ` + www.TLCP.SignCert + " (names www.example.cn, *.www.example.cn) nor by the TLS certificate " + www.TLS.Cert, "gmgate cert issue --dns api.example.cn"},
		api.Path() + ".hosts[1]": {`"*.api.example.cn" is not named by the TLCP signing certificate`, "--dns '*.api.example.cn'"},
		api.Path() + ".hosts[3]": {`"a.img.www.example.cn" is not named by the TLCP signing certificate`},
		www.Path() + ".hosts[1]": {`"*.www.example.cn" is not named by the ACME certificate (for www.example.cn)`, "ACME here cannot obtain wildcard certificates"},
	} {
		w, ok := got[path]
		if !ok {
			t.Errorf("no warning at %s: %v", path, got)
			continue
		}
		delete(got, path)
		for _, text := range want {
			if !strings.Contains(w, text) {
				t.Errorf("warning at %s lacks %q:\n%s", path, text, w)
			}
		}
	}
	// img.www.example.cn is under *.www.example.cn of the certificate,
	// and www's own name is an ACME domain.
	for path, w := range got {
		t.Errorf("unexpected warning at %s: %s", path, w)
	}
}

// appendToServerName returns the ClientHello record hello (one record, as
// Go's TLS and tlcp clients send it) with c appended to its server name,
// every length around it grown by one.
func appendToServerName(t *testing.T, hello []byte, c byte) []byte {
	t.Helper()
	fail := func() []byte { t.Fatalf("not a ClientHello with a server name: % x", hello); return nil }
	if len(hello) < 9 || hello[0] != 22 || hello[5] != 1 {
		return fail()
	}
	// record header (5), handshake header (4), version (2), random (32)
	i := 5 + 4 + 2 + 32
	skip := func(lenBytes int) bool {
		if i+lenBytes > len(hello) {
			return false
		}
		n := 0
		for k := 0; k < lenBytes; k++ {
			n = n<<8 | int(hello[i+k])
		}
		i += lenBytes + n
		return i <= len(hello)
	}
	if !skip(1) || !skip(2) || !skip(1) { // session ID, suites, compression
		return fail()
	}
	extsLen := i
	i += 2
	for i+4 <= len(hello) {
		typ, n := int(hello[i])<<8|int(hello[i+1]), int(hello[i+2])<<8|int(hello[i+3])
		if typ != 0 {
			i += 4 + n
			continue
		}
		// server_name: ext len (i+2), list len (i+4), type (i+6), name len (i+7)
		end := i + 4 + n
		out := append(append(append([]byte{}, hello[:end]...), c), hello[end:]...)
		for _, at := range []int{3, extsLen, i + 2, i + 4, i + 7} {
			v := int(out[at])<<8 | int(out[at+1]) + 1
			out[at], out[at+1] = byte(v>>8), byte(v)
		}
		v := int(out[6])<<16 | int(out[7])<<8 | int(out[8]) + 1
		out[6], out[7], out[8] = byte(v>>16), byte(v>>8), byte(v)
		return out
	}
	return fail()
}

// firstRecord runs a client handshake against a pipe and returns its
// first record, the ClientHello.
func firstRecord(t *testing.T, handshake func(net.Conn) error) []byte {
	t.Helper()
	client, server := net.Pipe()
	go func() {
		handshake(client)
		client.Close()
	}()
	defer server.Close()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// As docs/config.md says: a trailing dot in the server name of a
// ClientHello (which RFC 6066 forbids, and which gmgate probe, Go's and
// tlcp's clients, curl and browsers leave out) is refused on both
// protocols with the decode_error alert as the message is decoded, before
// any site is chosen: tlcp refuses it as crypto/tls does, so that one
// name behaves the same on both. Without the dot, the same hello is
// served. A server name that is not a host name is refused too, on TLCP
// with decode_error, on TLS with unrecognized_name.
func TestSitesTrailingDotServerName(t *testing.T) {
	s := startServer(t, siteConfig(t, true, siteUpstreams(t)), nil)
	reply := func(hello []byte) []byte {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr("edge").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		hdr := make([]byte, 7)
		if _, err := io.ReadFull(c, hdr[:5]); err != nil {
			t.Fatal(err)
		}
		if hdr[0] == 21 {
			io.ReadFull(c, hdr[5:])
		}
		return hdr
	}
	for proto, hello := range map[string][]byte{
		"tlcp": firstRecord(t, func(c net.Conn) error {
			return tlcp.Client(c, &tlcp.Config{ServerName: "www.example.cn", SendServerName: true, InsecureSkipVerify: true}).Handshake()
		}),
		"tls": firstRecord(t, func(c net.Conn) error {
			return tls.Client(c, &tls.Config{ServerName: "www.example.cn", InsecureSkipVerify: true}).Handshake()
		}),
	} {
		if got := reply(hello); got[0] != 22 {
			t.Errorf("%s with server name www.example.cn: first record % x, want a handshake record (ServerHello)", proto, got)
		}
		if got := reply(appendToServerName(t, hello, '.')); got[0] != 21 || got[6] != 50 {
			t.Errorf("%s with server name www.example.cn.: % x, want the decode_error alert (50)", proto, got)
		}
		// A name that is not a host name: tlcp refuses it as it decodes
		// the hello, crypto/tls takes it and the site index refuses it.
		want := map[string]byte{"tlcp": 50, "tls": 112}[proto]
		for _, c := range []byte{':', '!'} {
			if got := reply(appendToServerName(t, hello, c)); got[0] != 21 || got[6] != want {
				t.Errorf("%s with server name www.example.cn%c: % x, want alert %d", proto, c, got, want)
			}
		}
		// The rewrite itself is sound: another name that way is served
		// (by the default site).
		if got := reply(appendToServerName(t, hello, 'x')); got[0] != 22 {
			t.Errorf("%s with server name www.example.cnx: first record % x, want a handshake record", proto, got)
		}
		// As counted: crypto/tls does not say which alert it sent.
		result := map[string]string{"tlcp": "alert_sent_error_decoding_message", "tls": "error"}[proto]
		testwait.For(t, proto+" decode errors counted", func() bool {
			v, _ := metricValue(scrape(t, s), "gmgate_handshakes_total", map[string]string{"protocol": proto, "result": result})
			return v >= 1
		})
	}
}

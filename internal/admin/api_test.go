package admin

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
)

// fakeState is a gateway's state made up by the test.
type fakeState struct {
	mu        sync.Mutex
	listeners []ListenerInfo
	certs     []certs.ServedCertificate
	revoc     []RevocationScope
	upstreams []UpstreamInfo
	reloads   []ReloadRecord
	reloadErr error
	drained   map[string]bool
}

func (f *fakeState) Config() ConfigInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ConfigInfo{File: "/etc/gmgate/gmgate.yaml", Generation: 1 + len(f.reloads), LoadedAt: time.Unix(1700000000, 0), Reloads: f.reloads}
}
func (f *fakeState) Listeners() []ListenerInfo               { return f.listeners }
func (f *fakeState) Certificates() []certs.ServedCertificate { return f.certs }
func (f *fakeState) Upstreams() []UpstreamInfo               { return f.upstreams }
func (f *fakeState) Revocation() []RevocationScope           { return f.revoc }
func (f *fakeState) SessionCaches() SessionInfo {
	return SessionInfo{Caches: []SessionCacheInfo{{Source: "edge/api", Size: 20000, LifetimeSeconds: 3600}}, Store: "redis"}
}
func (f *fakeState) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reloadErr != nil {
		f.reloads = append(f.reloads, ReloadRecord{Result: "failure", Problems: []string{f.reloadErr.Error()}})
		return f.reloadErr
	}
	f.reloads = append(f.reloads, ReloadRecord{Result: "success"})
	return nil
}
func (f *fakeState) SetDrained(up, target string, drained bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if up != "app" || target != "10.0.0.5:8080" {
		return false, ErrNotFound
	}
	changed := f.drained[target] != drained
	f.drained[target] = drained
	return changed, nil
}

func testCert(t *testing.T, cn string, notAfter time.Time) *smx509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x1234), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type testServer struct {
	url     string
	state   *fakeState
	metrics *observe.Metrics
	access  *Access
	logs    *bytes.Buffer
	logMu   *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func newTestServer(t *testing.T, access *Access) *testServer {
	t.Helper()
	now := time.Now()
	st := &fakeState{
		drained: map[string]bool{},
		listeners: []ListenerInfo{{Name: "edge", Listen: "127.0.0.1:443", Protocol: "auto", Sites: []SiteInfo{
			{Name: "api", Hosts: []string{"api.example.cn"}, Default: true, Protocols: []string{"tlcp", "tls"}},
			{Name: "www", Hosts: []string{"www.example.cn"}, Protocols: []string{"tlcp", "tls"}},
		}}},
		certs: []certs.ServedCertificate{
			{Source: "edge/api", Role: "tls", Leaf: testCert(t, "api.example.cn", now.Add(90*24*time.Hour+time.Hour)), KeyBackend: "file"},
			{Source: "edge/www", Role: "tls", Leaf: testCert(t, "www.example.cn", now.Add(-48*time.Hour)), KeyBackend: "sdf",
				Staple: &certs.StapleReport{State: certs.StapleGood, NextUpdate: now.Add(12 * time.Hour), Responder: "http://ocsp.example.cn/", FetchFailures: 2}},
		},
		revoc: []RevocationScope{
			{Scope: "edge/api/tls", Checks: "client", Policy: "fail_closed", Sources: []revocation.SourceReport{
				{Kind: "crl", Source: "/etc/gmgate/clients.crl", State: "ok", ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(23 * time.Hour), Revoked: 3, LastFetch: now, LastSuccess: now},
				{Kind: "crl", Source: "http://ca.example.cn/clients.crl", State: "expired", LastFetch: now, LastError: "CRL http://ca.example.cn/clients.crl answered 404 <Not Found>"},
				{Kind: "ocsp", Source: "aia", State: "not_asked"},
			}},
			{Scope: "upstreams.pay", Checks: "upstream", Policy: "fail_open", Sources: []revocation.SourceReport{
				{Kind: "ocsp", Source: "http://ocsp.example.cn/", State: "failing", LastFetch: now, LastSuccess: now.Add(-time.Hour), LastError: "timeout"},
			}},
		},
		upstreams: []UpstreamInfo{{Name: "app", Scheme: "http", Policy: "round_robin", Targets: []upstream.TargetState{
			{URL: "http://10.0.0.5:8080", Healthy: true},
			{URL: "http://10.0.0.6:8080", Healthy: true, EjectedUntil: now.Add(time.Minute), LastError: "dial tcp: connection refused", LastErrorAt: now},
			{URL: "http://10.0.0.7:8080", Healthy: false},
			{URL: "http://10.0.0.8:8080", Healthy: true, Drained: true},
		}}},
	}
	m := observe.NewMetrics()
	if access == nil {
		access = &Access{}
	}
	logs, mu := &bytes.Buffer{}, &sync.Mutex{}
	h := New(Options{State: st, Metrics: m, Log: slog.New(slog.NewJSONHandler(lockedWriter{mu, logs}, nil)), Access: func() *Access { return access }, SampleEvery: 10 * time.Millisecond})
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	h.Mount(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "# metrics") })
	srv := httptest.NewServer(h.Protect(mux))
	t.Cleanup(srv.Close)
	return &testServer{url: srv.URL, state: st, metrics: m, access: access, logs: logs, logMu: mu}
}

func (ts *testServer) do(t *testing.T, method, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, nil)
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
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func (ts *testServer) getJSON(t *testing.T, path string, v any) []byte {
	t.Helper()
	code, body := ts.do(t, "GET", path, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return body
}

// hasKeys fails unless m has every key.
func hasKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: no %q in %v", what, k, m)
		}
	}
}

// TestAPISchema reads every GET endpoint and checks the fields each
// answer promises.
func TestAPISchema(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.metrics.Handshake("tlcp", "ECC_SM4_GCM_SM3", "api", "ok", time.Millisecond)
	ts.metrics.Handshake("tls1.3", "TLS_AES_128_GCM_SHA256", "api", "ok", time.Millisecond)
	ts.metrics.Request("api", "tlcp", "ECC_SM4_GCM_SM3")
	ts.metrics.Failures.Add(observe.HandshakeFailure{Time: time.Now(), Listener: "edge", Client: "127.0.0.1:5000", Protocol: "tlcp", Result: "timeout", Cause: "i/o timeout"})

	var index map[string]any
	ts.getJSON(t, "/api/v1/", &index)
	hasKeys(t, "index", index, "version", "endpoints", "write_actions")
	for _, e := range index["endpoints"].([]any) {
		method, path, _ := strings.Cut(e.(string), " ")
		if method != "GET" {
			continue
		}
		var m map[string]any
		ts.getJSON(t, path, &m)
	}

	var cfg map[string]any
	ts.getJSON(t, "/api/v1/config", &cfg)
	hasKeys(t, "config", cfg, "file", "generation", "loaded_at", "reloads")

	var ls struct {
		Listeners []ListenerInfo `json:"listeners"`
	}
	ts.getJSON(t, "/api/v1/listeners", &ls)
	if len(ls.Listeners) != 1 || len(ls.Listeners[0].Sites) != 2 || ls.Listeners[0].Sites[0].Protocols[0] != "tlcp" {
		t.Errorf("listeners: %+v", ls)
	}

	var cs struct {
		Certificates []map[string]any `json:"certificates"`
	}
	ts.getJSON(t, "/api/v1/certificates", &cs)
	if len(cs.Certificates) != 2 {
		t.Fatalf("certificates: %v", cs)
	}
	for _, c := range cs.Certificates {
		hasKeys(t, "certificate", c, "source", "role", "subject", "sans", "issuer", "serial", "key_type", "key_backend", "not_after", "days_left", "revocation")
	}
	if d := cs.Certificates[0]["days_left"].(float64); d != 90 {
		t.Errorf("days_left of a certificate valid for 90 days and an hour: %v", d)
	}
	if d := cs.Certificates[1]["days_left"].(float64); d != -2 {
		t.Errorf("days_left of a certificate expired two days ago: %v", d)
	}
	if cs.Certificates[0]["key_type"] != "ecdsa-P-256" || cs.Certificates[0]["serial"] != "1234" || cs.Certificates[1]["key_backend"] != "sdf" {
		t.Errorf("certificate fields: %v", cs.Certificates)
	}
	checkRevocationSchema(t, ts)

	var ups struct {
		Upstreams []struct {
			Name      string           `json:"name"`
			InService int              `json:"in_service"`
			Targets   []map[string]any `json:"targets"`
			Latency   map[string]any   `json:"latency"`
		} `json:"upstreams"`
	}
	ts.getJSON(t, "/api/v1/upstreams", &ups)
	if len(ups.Upstreams) != 1 || ups.Upstreams[0].InService != 1 {
		t.Fatalf("upstreams: %+v", ups)
	}
	var states []string
	for _, tg := range ups.Upstreams[0].Targets {
		hasKeys(t, "target", tg, "url", "state", "healthy", "drained", "in_flight")
		states = append(states, tg["state"].(string))
	}
	if got := strings.Join(states, ","); got != "in_service,ejected,down,drained" {
		t.Errorf("target states: %s", got)
	}
	if ups.Upstreams[0].Targets[1]["last_error"] != "dial tcp: connection refused" || ups.Upstreams[0].Targets[1]["ejected_until"] == nil {
		t.Errorf("ejected target: %v", ups.Upstreams[0].Targets[1])
	}

	var sess map[string]any
	ts.getJSON(t, "/api/v1/sessions", &sess)
	hasKeys(t, "sessions", sess, "caches", "resumption", "store")

	var acc map[string]any
	ts.getJSON(t, "/api/v1/accel", &acc)
	hasKeys(t, "accel", acc, "backends")

	var fl map[string]any
	ts.getJSON(t, "/api/v1/handshakes/failures", &fl)
	hasKeys(t, "failures", fl, "failures", "kept", "capacity", "total")
	if fl["total"].(float64) != 1 {
		t.Errorf("failures: %v", fl)
	}

	var cost map[string]any
	ts.getJSON(t, "/api/v1/cost", &cost)
	hasKeys(t, "cost", cost, "interval_seconds", "points", "since_start")

	code, body := ts.do(t, "GET", "/api/v1/nonesuch", "")
	if code != http.StatusNotFound || !json.Valid(body) {
		t.Errorf("unknown endpoint: %d %s", code, body)
	}
}

// TestAPIMigration checks the GM share by site: TLCP and TLS 1.3 with
// ShangMi suites are GM, the others are not, and every configured site
// shows even without traffic.
func TestAPIMigration(t *testing.T) {
	ts := newTestServer(t, nil)
	for range 3 {
		ts.metrics.Handshake("tlcp", "ECC_SM4_GCM_SM3", "api", "ok", time.Millisecond)
		ts.metrics.Request("api", "tlcp", "ECC_SM4_GCM_SM3")
	}
	ts.metrics.Handshake("tls1.3-sm", "TLS_SM4_GCM_SM3", "api", "ok", time.Millisecond)
	ts.metrics.Handshake("tls1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "api", "ok", time.Millisecond)
	ts.metrics.Handshake("tls1.3", "TLS_AES_128_GCM_SHA256", "api", "ok", time.Millisecond)
	ts.metrics.Request("api", "tls1.3", "TLS_AES_128_GCM_SHA256")
	// A failed handshake is no connection.
	ts.metrics.Handshake("tlcp", "none", "api", "timeout", time.Millisecond)
	ts.metrics.OfferedGM("api")

	var mv struct {
		Windows []int `json:"windows_minutes"`
		Sites   []struct {
			Site    string       `json:"site"`
			Windows []windowView `json:"windows"`
		} `json:"sites"`
	}
	ts.getJSON(t, "/api/v1/migration", &mv)
	if fmt.Sprint(mv.Windows) != "[1 15 60]" || len(mv.Sites) != 2 || mv.Sites[0].Site != "api" || mv.Sites[1].Site != "www" {
		t.Fatalf("migration: %+v", mv)
	}
	for _, w := range mv.Sites[0].Windows {
		if w.Connections != 6 || w.GMConnections != 4 || w.GMShare != 4.0/6 || w.Requests != 4 || w.GMRequestShare != 0.75 || w.TLSClientsOfferedGM != 1 || len(w.BySuite) != 4 {
			t.Errorf("api, %d minutes: %+v", w.Minutes, w)
		}
	}
	for _, w := range mv.Sites[1].Windows {
		if w.Connections != 0 || w.GMShare != 0 {
			t.Errorf("www without traffic: %+v", w)
		}
	}
}

// checkRevocationSchema checks the OCSP and CRL state the certificates
// endpoint adds: each certificate's stapling, and each scope's sources.
func checkRevocationSchema(t *testing.T, ts *testServer) {
	t.Helper()
	var cs struct {
		Certificates []struct {
			Revocation string      `json:"revocation"`
			OCSPStaple *stapleView `json:"ocsp_staple"`
		} `json:"certificates"`
		Checks    []revocationCheckView `json:"revocation_checks"`
		ChecksCut *bool                 `json:"revocation_checks_truncated"`
	}
	ts.getJSON(t, "/api/v1/certificates", &cs)
	if c := cs.Certificates[0]; c.Revocation != "not_checked" || c.OCSPStaple != nil {
		t.Errorf("a certificate not stapled: %+v", c)
	}
	if c := cs.Certificates[1]; c.Revocation != "good" || c.OCSPStaple == nil || c.OCSPStaple.State != "good" || c.OCSPStaple.NextUpdate == nil ||
		c.OCSPStaple.Responder != "http://ocsp.example.cn/" || c.OCSPStaple.FetchFailures != 2 {
		t.Errorf("a stapled certificate: %+v %+v", c, c.OCSPStaple)
	}
	if len(cs.Checks) != 2 || cs.ChecksCut == nil || *cs.ChecksCut {
		t.Fatalf("revocation checks: %+v", cs.Checks)
	}
	client, up := cs.Checks[0], cs.Checks[1]
	if client.Scope != "edge/api/tls" || client.Checks != "client" || client.Policy != "fail_closed" || len(client.Sources) != 3 {
		t.Fatalf("client scope: %+v", client)
	}
	file, url, aia := client.Sources[0], client.Sources[1], client.Sources[2]
	if file.Kind != "crl" || file.State != "ok" || file.NextUpdate == nil || file.ThisUpdate == nil || file.Revoked == nil || *file.Revoked != 3 ||
		file.LastFetch == nil || file.LastSuccess == nil || file.LastError != "" {
		t.Errorf("loaded CRL: %+v", file)
	}
	if url.State != "expired" || url.NextUpdate != nil || url.Revoked != nil || url.LastSuccess != nil || !strings.Contains(url.LastError, `\x3cNot Found\x3e`) {
		t.Errorf("CRL never loaded: %+v", url)
	}
	if aia.Kind != "ocsp" || aia.Source != "aia" || aia.State != "not_asked" || aia.LastFetch != nil {
		t.Errorf("OCSP not asked yet: %+v", aia)
	}
	if up.Checks != "upstream" || up.Policy != "fail_open" || len(up.Sources) != 1 || up.Sources[0].State != "failing" || up.Sources[0].LastSuccess == nil {
		t.Errorf("upstream scope: %+v", up)
	}
}

// TestAPIRedaction checks that names from the network are escaped, that
// no answer carries the token, and that key references stay out.
func TestAPIRedaction(t *testing.T) {
	const token = "s3cret-token-0123456789abcdef"
	ts := newTestServer(t, &Access{Tokens: []Token{{Name: "ops", value: []byte(token)}}, WriteActions: true})
	ts.metrics.Failures.Add(observe.HandshakeFailure{
		Listener: "edge", Client: "192.0.2.1:4000", Protocol: "tls1.3", Result: "alert_sent_unrecognized_name",
		SNI: "<script>alert(1)</script>\x00\x1b[31m" + strings.Repeat("a", 1000), Cause: "bad \xff name",
	})
	for _, path := range []string{"/api/v1/", "/api/v1/config", "/api/v1/listeners", "/api/v1/certificates", "/api/v1/upstreams",
		"/api/v1/sessions", "/api/v1/accel", "/api/v1/handshakes/failures", "/api/v1/migration", "/api/v1/cost"} {
		code, body := ts.do(t, "GET", path, token)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if bytes.Contains(body, []byte(token)) {
			t.Errorf("%s carries the token", path)
		}
		if bytes.Contains(body, []byte("<script")) || bytes.Contains(body, []byte{0}) || bytes.Contains(body, []byte("\\u001b")) {
			t.Errorf("%s carries an unescaped name: %s", path, body)
		}
	}
	var fl struct {
		Failures []observe.HandshakeFailure `json:"failures"`
	}
	code, body := ts.do(t, "GET", "/api/v1/handshakes/failures", token)
	if code != 200 || json.Unmarshal(body, &fl) != nil || len(fl.Failures) != 1 {
		t.Fatalf("failures: %d %s", code, body)
	}
	sni := fl.Failures[0].SNI
	if !strings.HasPrefix(sni, `\x3cscript\x3ealert(1)\x3c/script\x3e\x00\x1b[31maaa`) || len(sni) > 300 || !strings.HasSuffix(sni, "…") {
		t.Errorf("server name kept as %q", sni)
	}
	if fl.Failures[0].Cause != `bad \xff name` {
		t.Errorf("cause kept as %q", fl.Failures[0].Cause)
	}
	// The write action's log line names the token's holder, not the token.
	if code, body := ts.do(t, "POST", "/api/v1/reload", token); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	ts.logMu.Lock()
	logs := ts.logs.String()
	ts.logMu.Unlock()
	if strings.Contains(logs, token) || !strings.Contains(logs, `"by":"ops"`) {
		t.Errorf("write action log: %s", logs)
	}
}

// TestAPIBoundedSizes floods every source and checks that the answers
// stay bounded.
func TestAPIBoundedSizes(t *testing.T) {
	ts := newTestServer(t, nil)
	for i := range 1000 {
		ts.metrics.Failures.Add(observe.HandshakeFailure{Listener: "edge", Cause: strings.Repeat("x", 10000), SNI: fmt.Sprintf("host%d.example", i)})
	}
	for i := range 2000 {
		ts.metrics.Handshake("tlcp", fmt.Sprintf("SUITE_%d", i), fmt.Sprintf("site%d", i), "ok", time.Millisecond)
	}
	var many []ListenerInfo
	for i := range 3000 {
		many = append(many, ListenerInfo{Name: fmt.Sprintf("l%d", i), Sites: []SiteInfo{{Name: fmt.Sprintf("s%d", i)}}})
	}
	ts.state.listeners = many
	var targets []upstream.TargetState
	for i := range 3000 {
		targets = append(targets, upstream.TargetState{URL: fmt.Sprintf("http://10.0.%d.%d:80", i/256, i%256), Healthy: true, LastError: strings.Repeat("e", 5000)})
	}
	ts.state.upstreams = []UpstreamInfo{{Name: "big", Targets: targets}}
	var scopes []RevocationScope
	for i := range 1000 {
		sc := RevocationScope{Scope: fmt.Sprintf("edge/site%d/tls", i), Checks: "client", Policy: "fail_closed"}
		for j := range 100 {
			sc.Sources = append(sc.Sources, revocation.SourceReport{Kind: "crl", Source: fmt.Sprintf("/etc/gmgate/crl%d.pem", j), State: "expired", LastError: strings.Repeat("e", 5000)})
		}
		scopes = append(scopes, sc)
	}
	ts.state.revoc = scopes

	var fl struct {
		Failures []observe.HandshakeFailure `json:"failures"`
		Total    int                        `json:"total"`
	}
	body := ts.getJSON(t, "/api/v1/handshakes/failures", &fl)
	if len(fl.Failures) != observe.RecentFailures || fl.Total != 1000 || fl.Failures[0].SNI != "host999.example" {
		t.Errorf("failures: %d kept of %d, newest %q", len(fl.Failures), fl.Total, fl.Failures[0].SNI)
	}
	for _, f := range fl.Failures {
		if len(f.Cause) > 300 {
			t.Fatalf("a cause of %d bytes", len(f.Cause))
		}
	}
	if len(body) > 100<<10 {
		t.Errorf("failures answer of %d bytes", len(body))
	}

	var ls struct {
		Listeners []ListenerInfo `json:"listeners"`
		Truncated bool           `json:"truncated"`
	}
	ts.getJSON(t, "/api/v1/listeners", &ls)
	if len(ls.Listeners) != maxItems || !ls.Truncated {
		t.Errorf("listeners: %d, truncated %v", len(ls.Listeners), ls.Truncated)
	}

	var ups struct {
		Upstreams []struct {
			Targets []targetView `json:"targets"`
		} `json:"upstreams"`
	}
	body = ts.getJSON(t, "/api/v1/upstreams", &ups)
	if len(ups.Upstreams[0].Targets) != maxItems || len(ups.Upstreams[0].Targets[0].LastError) > 300 {
		t.Errorf("targets: %d, error of %d bytes", len(ups.Upstreams[0].Targets), len(ups.Upstreams[0].Targets[0].LastError))
	}
	if len(body) > maxAnswerBytes {
		t.Errorf("upstreams answer of %d bytes", len(body))
	}

	var cs struct {
		Checks    []revocationCheckView `json:"revocation_checks"`
		Truncated bool                  `json:"revocation_checks_truncated"`
	}
	body = ts.getJSON(t, "/api/v1/certificates", &cs)
	sources := 0
	for _, c := range cs.Checks {
		sources += len(c.Sources)
	}
	if len(cs.Checks) != maxItems || !cs.Truncated || sources != maxRevocationSources || len(cs.Checks[0].Sources[0].LastError) > 300 || len(body) > maxAnswerBytes {
		t.Errorf("revocation checks: %d scopes, %d sources, truncated %v, %d bytes", len(cs.Checks), sources, cs.Truncated, len(body))
	}

	var mv struct {
		Sites []siteMigration `json:"sites"`
	}
	body = ts.getJSON(t, "/api/v1/migration", &mv)
	if len(mv.Sites) > maxItems || len(body) > maxAnswerBytes {
		t.Errorf("migration: %d sites, %d bytes", len(mv.Sites), len(body))
	}
	// The window keeps at most maxWindowSeries series: the rest is
	// counted under "(other)".
	series := len(ts.metrics.Window.Counts(60))
	if series > 513 {
		t.Errorf("the window keeps %d series", series)
	}
}

// TestAccessControl: with a token, every admin path but the probes and
// the console's files needs it; write actions are off unless enabled and
// need the token even then.
func TestAccessControl(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	access := &Access{Tokens: []Token{{Name: "token", value: []byte(token)}}}
	ts := newTestServer(t, access)

	for _, path := range []string{"/api/v1/", "/api/v1/config", "/api/v1/migration", "/metrics"} {
		if code, _ := ts.do(t, "GET", path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, code)
		}
		if code, _ := ts.do(t, "GET", path, "wrong-token-0123456789abcdef"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", path, code)
		}
		if code, body := ts.do(t, "GET", path, token); code != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, code, body)
		}
	}
	for _, path := range []string{"/healthz", "/console/", "/console/console.js"} {
		if code, _ := ts.do(t, "GET", path, ""); code != http.StatusOK {
			t.Errorf("%s without a token: %d, want 200", path, code)
		}
	}

	// Write actions: off by default, even with the token.
	writes := []string{"/api/v1/reload", "/api/v1/upstreams/app/targets/10.0.0.5:8080/drain", "/api/v1/upstreams/app/targets/10.0.0.5:8080/undrain"}
	for _, path := range writes {
		if code, _ := ts.do(t, "POST", path, token); code != http.StatusForbidden {
			t.Errorf("POST %s with write actions off: %d, want 403", path, code)
		}
	}
	if len(ts.state.reloads) != 0 || len(ts.state.drained) != 0 {
		t.Fatal("a write action ran while they were off")
	}
	access.WriteActions = true
	for _, path := range writes {
		if code, _ := ts.do(t, "POST", path, ""); code != http.StatusUnauthorized {
			t.Errorf("POST %s without a token: %d, want 401", path, code)
		}
	}
	// A GET of a write action is not one.
	if code, _ := ts.do(t, "GET", "/api/v1/reload", token); code == http.StatusOK {
		t.Errorf("GET /api/v1/reload answered 200")
	}
	code, body := ts.do(t, "POST", writes[1], token)
	if code != http.StatusOK || !strings.Contains(string(body), `"changed": true`) || !ts.state.drained["10.0.0.5:8080"] {
		t.Fatalf("drain: %d %s", code, body)
	}
	if code, body := ts.do(t, "POST", writes[2], token); code != http.StatusOK || ts.state.drained["10.0.0.5:8080"] {
		t.Fatalf("undrain: %d %s", code, body)
	}
	if code, _ := ts.do(t, "POST", "/api/v1/upstreams/app/targets/10.9.9.9:1/drain", token); code != http.StatusNotFound {
		t.Errorf("drain of an unknown target: %d, want 404", code)
	}
	if code, body := ts.do(t, "POST", writes[0], token); code != http.StatusOK || !strings.Contains(string(body), `"generation": 2`) {
		t.Errorf("reload: %d %s", code, body)
	}
	ts.state.reloadErr = errors.New("gmgate.yaml:3: upstreams.app.targets[0]: no port")
	if code, body := ts.do(t, "POST", writes[0], token); code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "no port") {
		t.Errorf("failed reload: %d %s", code, body)
	}
	ts.logMu.Lock()
	logs := ts.logs.String()
	ts.logMu.Unlock()
	for _, want := range []string{`"action":"drain"`, `"action":"undrain"`, `"action":"reload"`, `"target":"10.0.0.5:8080"`, `"by":"token"`, `"client":"127.0.0.1:`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the write log has no %s:\n%s", want, logs)
		}
	}
}

// TestLoopbackHostOnly: without access control the API answers requests
// addressed to a loopback name only (DNS rebinding).
func TestLoopbackHostOnly(t *testing.T) {
	ts := newTestServer(t, nil)
	req, _ := http.NewRequest("GET", ts.url+"/api/v1/config", nil)
	req.Host = "attacker.example:9180"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host attacker.example: %d, want 403", resp.StatusCode)
	}
	for _, host := range []string{"localhost:9180", "127.0.0.1:9180", "[::1]:9180"} {
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, resp.StatusCode)
		}
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "token")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	toks, err := ReadTokenFile(write("# admins\nalice 0123456789abcdef0123\n\nfedcba9876543210fedc\n"))
	if err != nil || len(toks) != 2 || toks[0].Name != "alice" || toks[1].Name != "token" {
		t.Fatalf("%v %+v", err, toks)
	}
	for _, bad := range []string{"", "# nothing\n", "qqq\n", "xx1 yy2 zz3\n"} {
		if _, err := ReadTokenFile(write(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		} else if bad != "" && strings.Contains(err.Error(), strings.TrimSpace(bad)) && !strings.HasPrefix(bad, "#") {
			t.Errorf("%q: the error quotes the file: %v", bad, err)
		}
	}
}

func TestConsoleServed(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.do(t, "GET", "/console/", "")
	if code != http.StatusOK || !strings.Contains(string(body), `<script src="console.js">`) {
		t.Fatalf("console: %d %.200s", code, body)
	}
	code, body = ts.do(t, "GET", "/console/console.js", "")
	if code != http.StatusOK || !strings.Contains(string(body), "/api/v1/") {
		t.Fatalf("console.js: %d", code)
	}
	// Nothing outside the page's own files.
	for _, s := range []string{"http://", "https://"} {
		if bytes.Contains(body, []byte(s)) && !bytes.Contains(body, []byte("http://www.w3.org/2000/svg")) {
			t.Errorf("console.js loads from %s", s)
		}
	}
}

package certs

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type storeFixture struct {
	ca      *pki.CA
	dir     string
	files   pki.DualFiles
	logs    *testlog.Buffer
	store   *Store
	reloads chan error
}

func newStoreFixture(t *testing.T) *storeFixture {
	t.Helper()
	f := &storeFixture{ca: newTestCA(t, false), dir: t.TempDir(), logs: &testlog.Buffer{}, reloads: make(chan error, 16)}
	f.files = writeTestPair(t, f.ca, f.dir, "site", nil, "site.example.cn")
	var err error
	f.store, err = NewStore(StoreOptions{
		Logger:   slog.New(slog.NewTextHandler(f.logs, nil)),
		OnReload: func(err error) { f.reloads <- err },
		Debounce: 20 * time.Millisecond,
	}, Source{Name: "edge", TLCP: &TLCPFiles{SignCert: f.files.SignCert, SignKey: f.files.SignKey, EncCert: f.files.EncCert, EncKey: f.files.EncKey}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serve runs a TLCP echo server on the store until the test ends.
func (f *storeFixture) serve(t *testing.T) string {
	cfg := &tlcp.Config{GetCertificate: f.store.GetTLCPCertificate}
	return testnet.Serve(t, func(c net.Conn) {
		tc := tlcp.Server(c, cfg)
		defer tc.Close()
		io.Copy(tc, tc)
	})
}

func (f *storeFixture) dial(t *testing.T, addr string) *tlcp.Conn {
	t.Helper()
	c, err := tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: f.ca.Pool(), ServerName: "site.example.cn"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write on live connection: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read on live connection: %v", err)
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
}

func TestReloadSwapKeepsLiveConnection(t *testing.T) {
	f := newStoreFixture(t)
	addr := f.serve(t)
	live := f.dial(t, addr)
	echo(t, live, "before")
	oldSerial := live.ConnectionState().PeerCertificates[0].SerialNumber

	writeTestPair(t, f.ca, f.dir, "site", nil, "site.example.cn")
	if err := f.store.Reload(); err != nil {
		t.Fatal(err)
	}
	echo(t, live, "after reload")

	fresh := f.dial(t, addr)
	newSerial := fresh.ConnectionState().PeerCertificates[0].SerialNumber
	if newSerial.Cmp(oldSerial) == 0 {
		t.Fatal("a new connection still got the old certificate")
	}
	want, _ := pemfile.ReadCertificates(f.files.SignCert)
	if newSerial.Cmp(want[0].SerialNumber) != 0 {
		t.Fatal("a new connection did not get the certificate now on disk")
	}
	if !strings.Contains(f.logs.String(), "certificates reloaded") {
		t.Errorf("no reload log: %s", f.logs)
	}
}

func TestReloadInvalidKeepsOldSet(t *testing.T) {
	f := newStoreFixture(t)
	before := f.store.TLCPCertificate("edge")
	// A new sign certificate whose key is not written: the pair no longer
	// matches its key.
	d, err := f.ca.IssueDual(pki.IssueOptions{DNSNames: []string{"site.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pemfile.WriteCertFile(f.files.SignCert, d.SignCert); err != nil {
		t.Fatal(err)
	}
	err = f.store.Reload()
	if err == nil || !strings.Contains(err.Error(), "does not belong to sign_cert") {
		t.Fatalf("reload err = %v", err)
	}
	if f.store.TLCPCertificate("edge") != before {
		t.Fatal("the store replaced its certificates with an invalid set")
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "keeping the previous certificates") || !strings.Contains(logs, "does not belong to sign_cert") {
		t.Fatalf("log does not say why: %s", logs)
	}
	addr := f.serve(t)
	c := f.dial(t, addr)
	if c.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(before.SignLeaf.SerialNumber) != 0 {
		t.Fatal("not serving the old certificate after a failed reload")
	}
	if v := metricValue(t, f.store, "gmgate_certificate_last_reload_failed"); v != 1 {
		t.Errorf("last_reload_failed = %v", v)
	}
}

// metricValue gathers c and returns the value of the unlabelled gauge
// name.
func metricValue(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestWatchReloadsOnChange(t *testing.T) {
	f := newStoreFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.store.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	before := f.store.TLCPCertificate("edge").SignLeaf.SerialNumber
	// The watcher may not be installed yet when the first write lands;
	// rewriting until a successful reload arrives covers that.
	deadline := time.After(30 * time.Second)
	for {
		writeTestPair(t, f.ca, f.dir, "site", nil, "site.example.cn")
		select {
		case err := <-f.reloads:
			if err != nil {
				// Half-written pairs fail and keep the old set; the
				// next event completes it.
				continue
			}
			after := f.store.TLCPCertificate("edge").SignLeaf.SerialNumber
			if after.Cmp(before) == 0 {
				t.Fatal("reloaded but still the old certificate")
			}
			return
		case <-deadline:
			t.Fatal("no reload after the files changed")
		case <-time.After(2 * time.Second):
		}
	}
}

func TestStoreMetricsAndSelection(t *testing.T) {
	ca := newTestCA(t, false)
	dir := t.TempDir()
	a := writeTestPair(t, ca, dir, "a", nil, "a.example.cn")
	b := writeTestPair(t, ca, dir, "b", nil, "b.example.cn")
	ecCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ecCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"b.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := leaf.Write(dir, "b-tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Source{Name: "a", TLCP: &TLCPFiles{SignCert: a.SignCert, SignKey: a.SignKey, EncCert: a.EncCert, EncKey: a.EncKey}},
		Source{Name: "b", TLCP: &TLCPFiles{SignCert: b.SignCert, SignKey: b.SignKey, EncCert: b.EncCert, EncKey: b.EncKey}, TLS: &TLSFiles{Cert: cf, Key: kf}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetTLCPCertificate(&tlcp.ClientHelloInfo{ServerName: "b.example.cn"})
	if got.SignLeaf.DNSNames[0] != "b.example.cn" {
		t.Errorf("SNI b chose %v", got.SignLeaf.DNSNames)
	}
	got, _ = s.GetTLCPCertificate(&tlcp.ClientHelloInfo{ServerName: "unknown.example"})
	if got.SignLeaf.DNSNames[0] != "a.example.cn" {
		t.Errorf("unknown SNI chose %v, want the first", got.SignLeaf.DNSNames)
	}
	tc, err := s.GetTLSCertificate(&tls.ClientHelloInfo{ServerName: "b.example.cn"})
	if err != nil || tc.Leaf.DNSNames[0] != "b.example.cn" {
		t.Errorf("TLS cert = %v, %v", tc, err)
	}

	bSign, _ := pemfile.ReadCertificates(b.SignCert)
	want := strings.NewReader(`
# HELP gmgate_certificate_expiry_timestamp_seconds When each served certificate expires (NotAfter), as a Unix time.
# TYPE gmgate_certificate_expiry_timestamp_seconds gauge
` + expiryLines(t, map[string]string{"a/sign": a.SignCert, "a/enc": a.EncCert, "b/sign": b.SignCert, "b/enc": b.EncCert, "b/tls": cf}))
	if err := testutil.CollectAndCompare(s, want, "gmgate_certificate_expiry_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	if bSign[0].NotAfter.Unix() <= time.Now().Unix() {
		t.Fatal("fixture expired")
	}
}

// expiryLines renders the expected samples from the files on disk.
func expiryLines(t *testing.T, files map[string]string) string {
	var out strings.Builder
	for _, key := range []string{"a/enc", "a/sign", "b/enc", "b/sign", "b/tls"} {
		name, role, _ := strings.Cut(key, "/")
		certs, err := pemfile.ReadCertificates(files[key])
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(`gmgate_certificate_expiry_timestamp_seconds{name="` + name + `",role="` + role + `"} ` + strconv.FormatInt(certs[0].NotAfter.Unix(), 10) + "\n")
	}
	return out.String()
}

// A SignOnly source (a client identity) loads without an encryption
// pair, the other sources still need theirs, and only the files the
// sources name are watched.
func TestStoreSignOnlySource(t *testing.T) {
	ca := newTestCA(t, false)
	dir := t.TempDir()
	files := writeTestPair(t, ca, dir, "client", nil, "client.example.cn")
	signOnly := &TLCPFiles{SignCert: files.SignCert, SignKey: files.SignKey}
	if _, err := NewStore(StoreOptions{Logger: slog.New(slog.DiscardHandler)}, Source{Name: "edge", TLCP: signOnly}); err == nil || !strings.Contains(err.Error(), "enc_cert is not set") {
		t.Fatalf("a listener identity without an encryption pair: %v", err)
	}
	s, err := NewStore(StoreOptions{Logger: slog.New(slog.DiscardHandler)}, Source{Name: "upstreams.partner", TLCP: signOnly, SignOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.TLCPCertificate("upstreams.partner")
	if c == nil || c.SignKey == nil || c.EncKey != nil {
		t.Fatalf("client identity %+v", c)
	}
	for _, f := range s.watchedFiles() {
		if f == "" {
			t.Fatalf("an empty path is watched: %q", s.watchedFiles())
		}
	}
}

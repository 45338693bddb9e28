package proxy

import (
	"bytes"
	"context"
	"crypto"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
)

// writeDamagedBundle writes good (one PEM certificate) followed by a
// second certificate pasted without its last lines, and returns the
// file and the line where the damaged block begins.
func writeDamagedBundle(t *testing.T, dir, name string, good []byte) (string, int) {
	t.Helper()
	data := append(bytes.Clone(good), good[:len(good)*2/3]...)
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, bytes.Count(good, []byte("\n")) + 1
}

// Every CA bundle of the configuration is read whole: a damaged block
// (a CA pasted without its last lines) is a problem at the field that
// names the file, with the block, its line and the fix, as is a file
// without a certificate; neither is served without the CA.
func TestCABundlesReportDamagedBlocks(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	smGood := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Root.Raw})
	tlsGood, err := os.ReadFile(p.tlsRoot)
	if err != nil {
		t.Fatal(err)
	}
	smBad, smLine := writeDamagedBundle(t, dir, "sm2-bundle.pem", smGood)
	tlsBad, tlsLine := writeDamagedBundle(t, dir, "tls-bundle.pem", tlsGood)
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		sm2  bool
		set  func(cfg *config.Config, file string)
	}{
		{"tlcp.client_ca", true, func(cfg *config.Config, file string) { cfg.Listeners[0].TLCP.ClientCA = file }},
		{"tls.client_ca", false, func(cfg *config.Config, file string) { cfg.Listeners[0].TLS.ClientCA = file }},
		{"upstreams.app.tls.ca", false, func(cfg *config.Config, file string) {
			cfg.Upstreams["app"] = &config.Upstream{Targets: []string{"https://127.0.0.1:1"}, TLS: &config.UpstreamTLS{CA: file}}
		}},
		{"upstreams.app.tlcp.ca", true, func(cfg *config.Config, file string) {
			cfg.Upstreams["app"] = &config.Upstream{Targets: []string{"tlcp://127.0.0.1:1"}, TLCP: &config.UpstreamTLCP{CA: file}}
		}},
		{"tls.acme.ca_root", false, func(cfg *config.Config, file string) {
			cfg.StateDir = t.TempDir()
			cfg.Listeners[0].TLS = &config.TLS{ACME: &config.ACME{Domains: []string{"www.example.cn"}, CA: "https://127.0.0.1:1/directory", CARoot: file}}
		}},
	} {
		bad, line := tlsBad, tlsLine
		if c.sm2 {
			bad, line = smBad, smLine
		}
		for _, f := range []struct{ file, want string }{
			{bad, fmt.Sprintf("%s: PEM block 2 (line %d) is damaged: it is cut short or is not valid base64; copy the whole block again", bad, line)},
			{empty, empty},
		} {
			cfg := testConfig(p, "http://127.0.0.1:1")
			c.set(cfg, f.file)
			config.Defaults(cfg)
			_, err := Check(cfg, CheckOptions{})
			path := c.path
			if !strings.HasPrefix(path, "upstreams.") {
				// A field of the listener.
				path = config.Field(cfg.Listeners[0].Path(), path)
			}
			var ce *config.Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != path || !strings.Contains(ce.Problems[0].Msg+"; "+ce.Problems[0].Fix, f.want) {
				t.Errorf("%s: %s: check = %v; want one problem at %s with %q", c.path, filepath.Base(f.file), err, path, f.want)
			}
		}
	}
}

// An offline check reads every key reference as opening it would, but
// opens nothing: a typo in an sdf: parameter or an unknown scheme is a
// problem at the field and its line, while a PIN file that is not on
// this machine is not looked at.
func TestCheckOfflineParsesKeyReferences(t *testing.T) {
	p := getPKI(t)
	missingPIN := filepath.Join(t.TempDir(), "no-such-pin")
	doc := func(signKey, encKey, tlsKey string) string {
		return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %q
      enc_cert: %s
      enc_key: %q
    tls:
      cert: %s
      key: %q
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, p.dual.SignCert, signKey, p.dual.EncCert, encKey, p.tlsCert, tlsKey)
	}
	card := "sdf:/opt/vendor/libsdf.so?index=1&key=sign&pin-file=" + missingPIN
	good := doc(card, "sdf:/opt/vendor/libsdf.so?index=1&key=enc&pin-env=GMGATE_TEST_NO_SUCH_PIN", p.tlsKey)
	if _, err := Check(parseConfig(t, good), CheckOptions{Offline: true}); err != nil {
		t.Fatalf("offline check of well-formed references: %v", err)
	}
	// expect checks bad offline: one problem per key field, each at its
	// line with its text, none naming the PIN file.
	type problem struct {
		line       int
		path, text string
	}
	expect := func(what, bad string, want ...problem) {
		t.Helper()
		cfg := parseConfig(t, bad)
		_, err := Check(cfg, CheckOptions{Offline: true})
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Fatalf("offline check of %s: %v, want problems", what, err)
		}
		if len(ce.Problems) != len(want) {
			t.Fatalf("%s: %d problems, want %d:\n%v", what, len(ce.Problems), len(want), err)
		}
		for i, w := range want {
			pr := ce.Problems[i]
			w.path = config.Field(cfg.Listeners[0].Path(), w.path)
			if pr.Line != w.line || pr.Path != w.path || !strings.Contains(pr.Msg, w.text) {
				t.Errorf("%s: problem %d = %s, want line %d %s with %q", what, i, pr, w.line, w.path, w.text)
			}
			if strings.Contains(pr.String(), missingPIN) {
				t.Errorf("%s: problem %d names the PIN file: %s", what, i, pr)
			}
		}
	}
	expect("bad references", doc("sdf:/opt/vendor/libsdf.so?index=1&key=sing&pin-file="+missingPIN,
		"sdf:/opt/vendor/libsdf.so?idx=1&key=enc",
		"hsm:/dev/hsm0?slot=1"),
		problem{8, "tlcp.sign_key", `key="sing"; want key=sign or key=enc`},
		problem{10, "tlcp.enc_key", `unknown parameter "idx"`},
		problem{13, "tls.key", `unknown scheme "hsm"`})
	// What opening would refuse in a reference's secrets, before it
	// reads one: two sources of one PIN or password, a file: key's
	// misspelt password parameter.
	expect("bad secrets", doc("sdf:/opt/vendor/libsdf.so?index=1&key=sign&pin-env=GMGATE_TEST_NO_SUCH_PIN&pin-file="+missingPIN,
		"file:"+p.dual.EncKey+"?password-env=GMGATE_TEST_NO_SUCH_PASSWORD&password-file="+missingPIN,
		"file:"+p.tlsKey+"?password_env=GMGATE_TEST_NO_SUCH_PASSWORD"),
		problem{8, "tlcp.sign_key", "give either pin-env or pin-file, not both"},
		problem{10, "tlcp.enc_key", "give either password-env or password-file, not both"},
		problem{13, "tls.key", `unknown parameter "password_env"`})
}

// The client key of an https:// upstream and of the session store's
// Redis connection are read, not opened, by an offline check, like the
// listeners' keys.
func TestCheckOfflineReadsClientKeyReferences(t *testing.T) {
	p := getPKI(t)
	missing := filepath.Join(t.TempDir(), "not-on-this-machine.key")
	doc := func(key string) string {
		return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: http
    routes: [{upstream: app}]
upstreams:
  app:
    targets: ["https://127.0.0.1:1"]
    tls: {cert: %s, key: %q}
session_store:
  keys_file: /nonexistent/keys
  redis:
    addrs: ["127.0.0.1:1"]
    tls: {cert: %s, key: %q}
`, p.tlsCert, key, p.tlsCert, key)
	}
	res, err := Check(parseConfig(t, doc(missing)), CheckOptions{Offline: true})
	if err != nil {
		t.Errorf("offline check opened a client key: %v", err)
	} else {
		// Not opened, but said to be absent, at each field.
		var at []string
		for _, w := range res.Warnings {
			if strings.Contains(w.Msg, "key file "+missing+" is not on this machine") {
				at = append(at, fmt.Sprintf("%d %s", w.Line, w.Path))
			}
		}
		if want := "11 upstreams.app.tls.key, 16 session_store.redis.tls.key"; strings.Join(at, ", ") != want {
			t.Errorf("absent client key warnings at %v, want %s: %v", at, want, res.Warnings)
		}
	}
	_, err = Check(parseConfig(t, doc("sdf:/opt/vendor/libsdf.so?index=1&key=sing")), CheckOptions{Offline: true})
	var ce *config.Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("offline check of a bad client key reference: %v, want two problems", err)
	}
	for i, w := range []struct {
		line int
		path string
	}{{11, "upstreams.app.tls.key"}, {16, "session_store.redis.tls.key"}} {
		if pr := ce.Problems[i]; pr.Line != w.line || pr.Path != w.path || !strings.Contains(pr.Msg, `key="sing"; want key=sign or key=enc`) {
			t.Errorf("problem %d = %s, want line %d %s", i, pr, w.line, w.path)
		}
	}
}

// cardLikeBackend opens file keys but hands them out without SM2 key
// agreement, as keys held by a crypto card are.
type cardLikeBackend struct{}

type cardLikeKey struct{ k accel.Key }

func (c cardLikeKey) Public() crypto.PublicKey { return c.k.Public() }
func (c cardLikeKey) Sign(r io.Reader, m []byte, o crypto.SignerOpts) ([]byte, error) {
	return c.k.Sign(r, m, o)
}
func (c cardLikeKey) Decrypt(r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	return c.k.(crypto.Decrypter).Decrypt(r, m, o)
}
func (c cardLikeKey) Backend() string { return "cardlike" }
func (c cardLikeKey) Close() error    { return nil }

func (cardLikeBackend) Open(ctx context.Context, ref *accel.Ref) (accel.Key, error) {
	k, err := accel.Open(ctx, "file:"+ref.Path)
	if err != nil {
		return nil, err
	}
	return cardLikeKey{k}, nil
}

func init() { accel.Register("cardlike", cardLikeBackend{}) }

func TestECDHEWithCardEncryptionKey(t *testing.T) {
	p := getPKI(t)
	t.Run("explicit ECDHE suites are refused", func(t *testing.T) {
		cfg := testConfig(p, "http://127.0.0.1:1")
		cfg.Listeners[0].TLCP.EncKey = "cardlike:" + p.dual.EncKey
		cfg.Listeners[0].TLCP.Suites = []string{"ECC_SM4_GCM_SM3", "ECDHE_SM4_GCM_SM3"}
		cfg.Listeners[0].TLCP.SuitesDefaulted = false
		_, err := New(cfg, Options{Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), cfg.Listeners[0].Path()+".tlcp.suites: "+accel.ErrNoKeyAgreement.Error()) {
			t.Fatalf("got %v, want a tlcp.suites error about key agreement", err)
		}
		if n := strings.Count(err.Error(), cfg.Listeners[0].Path()); n != 1 || strings.Contains(err.Error(), "listener edge") {
			t.Errorf("the listener is named %d times: %v", n, err)
		}
	})
	t.Run("default suites drop ECDHE", func(t *testing.T) {
		cfg := testConfig(p, "http://127.0.0.1:1")
		cfg.Listeners[0].TLCP.EncKey = "cardlike:" + p.dual.EncKey
		if !cfg.Listeners[0].TLCP.SuitesDefaulted {
			t.Fatal("test config does not use the default suites")
		}
		s := startServer(t, cfg, nil)
		// ECC still works; a client offering only ECDHE finds no suite.
		conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		client, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.test"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost",
			CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3}, Certificates: []tlcp.Certificate{*client.Certificate()}})
		var ae *tlcp.AlertError
		if !errors.As(err, &ae) || ae.Alert != tlcp.AlertHandshakeFailure {
			t.Fatalf("ECDHE-only client: %v, want handshake_failure", err)
		}
	})
}

// A timeouts.client_hello longer than timeouts.handshake cannot take
// effect (the handshake timeout closes the connection first): config
// check warns, naming both fields. A handshake timeout lowered below the
// default client_hello, which is not in the file, is not warned about.
func TestClientHelloLongerThanHandshakeWarns(t *testing.T) {
	doc := func(timeouts string) string {
		return tcpListenerDoc("127.0.0.1:0", "off", "timeouts: {"+timeouts+"}\n")
	}
	for _, c := range []struct {
		timeouts, want string
	}{
		{"handshake: 3s, client_hello: 8s", "gmgate.yaml:3: timeouts.client_hello: 8s is longer than timeouts.handshake (3s), which closes a connection whose ClientHello has not arrived by then; set client_hello to at most 3s, or raise handshake"},
		{"handshake: 3s", ""},
		{"handshake: 10s, client_hello: 10s", ""},
	} {
		res, err := Check(parseConfig(t, doc(c.timeouts)), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range res.Warnings {
			if strings.Contains(w.String(), "client_hello") {
				got = append(got, w.String())
			}
		}
		if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
			t.Errorf("timeouts {%s}: warnings %q, want %q", c.timeouts, got, c.want)
		}
	}
}

// tcpListenerDoc is a configuration of one loopback tcp listener with the
// given admin.listen and log.access; extra (whole lines) comes third.
func tcpListenerDoc(admin, access, extra string) string {
	return `admin: {listen: "` + admin + `"}
log: {access: "` + access + `"}
` + extra + `listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: tcp
    routes: [{upstream: app}]
upstreams:
  app:
    targets: ["tcp://127.0.0.1:1"]
    health: {disabled: true}
`
}

// A problem of the file itself (a wildcard in tls.acme.domains) does not
// hide the problems of the files it names that it leaves alone: the
// ca_root of the same acme block is read too, and both are listed.
func TestCheckFileListsACMEFilesWithFileProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-root.pem")
	file := filepath.Join(dir, "gmgate.yaml")
	writeConfig(t, file, fmt.Sprintf(`state_dir: %s
admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    tls:
      acme:
        domains: ["*.example.cn", www.example.cn]
        ca: https://127.0.0.1:1/dir
        ca_root: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, dir, missing))
	for _, offline := range []bool{false, true} {
		_, _, err := CheckFile(file, CheckOptions{Offline: offline})
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Fatalf("offline %v: %v, want problems", offline, err)
		}
		var paths []string
		for _, p := range ce.Problems {
			paths = append(paths, fmt.Sprintf("%d %s", p.Line, p.Path))
		}
		want := []string{"10 listeners[0].tls.acme.domains[0]", "12 listeners[0].tls.acme.ca_root"}
		if strings.Join(paths, ", ") != strings.Join(want, ", ") {
			t.Errorf("offline %v: problems at %v, want %v:\n%v", offline, paths, want, err)
		}
		if !strings.Contains(err.Error(), missing) {
			t.Errorf("offline %v: the ca_root problem does not name the file:\n%v", offline, err)
		}
	}
}

// A CA file that is not there is named with its field and the fix, as a
// missing certificate is, whichever field names it: the CAs of tlcp://
// and https:// upstreams and the client CAs of both protocols. Serve and
// a reload build the same way, so they say the same.
func TestCheckMissingCAFiles(t *testing.T) {
	p := getPKI(t)
	missing := filepath.Join(t.TempDir(), "missing-ca.crt")
	cfg := parseConfig(t, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %[1]s
      sign_key: %[2]s
      enc_cert: %[3]s
      enc_key: %[4]s
      client_auth: require_and_verify
      client_ca: %[7]s
    routes: [{upstream: partner}]
  - name: web
    listen: "127.0.0.1:0"
    protocol: tls
    tls:
      cert: %[5]s
      key: %[6]s
      client_auth: require_and_verify
      client_ca: %[7]s
    routes: [{upstream: web}]
upstreams:
  partner:
    targets: ["tlcp://127.0.0.1:1"]
    tlcp: {ca: %[7]s}
  web:
    targets: ["https://127.0.0.1:1"]
    tls: {ca: %[7]s}
`, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, p.tlsCert, p.tlsKey, missing))
	_, err := Check(cfg, CheckOptions{Offline: true})
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("check: %v, want problems", err)
	}
	want := map[string]bool{
		"listeners[0].tlcp.client_ca": true, "listeners[1].tls.client_ca": true,
		"upstreams.partner.tlcp.ca": true, "upstreams.web.tls.ca": true,
	}
	for _, pr := range ce.Problems {
		if !want[pr.Path] {
			t.Errorf("unexpected problem %s", pr)
			continue
		}
		delete(want, pr.Path)
		field := pr.Path[strings.LastIndex(pr.Path, ".")+1:]
		if !strings.Contains(pr.String(), field+" "+missing+" does not exist; give the path of the PEM file of the CA certificates") {
			t.Errorf("%s: %s, want the field, the file and the fix", pr.Path, pr)
		}
	}
	for path := range want {
		t.Errorf("no problem at %s:\n%v", path, err)
	}
}

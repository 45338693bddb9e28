package proxy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/config"
)

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
	if _, err := Check(parseConfig(t, doc(missing)), CheckOptions{Offline: true}); err != nil {
		t.Errorf("offline check opened a client key: %v", err)
	}
	_, err := Check(parseConfig(t, doc("sdf:/opt/vendor/libsdf.so?index=1&key=sing")), CheckOptions{Offline: true})
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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A start that fails because of a key reference never shows a password
// or PIN: not in the error, not in any log line, whether the secret was
// written into the reference (in any case or encoding) or comes from the
// environment as it should.
func TestFailingStartNeverShowsSecrets(t *testing.T) {
	const secret = "Hunter2-s3cret"
	pki := newCheckPKI(t)
	served, other, encrypted := pki.good, pki.other, pki.encrypted
	// The right password of the encrypted keys, as the environment
	// gives it.
	const envSecret = "right password"
	t.Setenv("GMGATE_TEST_KEY_PASSWORD", envSecret)

	cases := []struct{ name, signKey, want string }{
		// Keys that open but do not match the certificates: the
		// mismatch message names the key reference.
		{"inline Password=", "file:" + other.SignKey + "?Password=" + secret, "the password is written in the configuration"},
		{"inline percent-encoded", "file:" + other.SignKey + "?password%3D" + secret, "the password is written in the configuration"},
		{"inline PIN on a card", "sdf:/nonexistent/libsdf.so?index=1&key=sign&pin%3d" + secret, "the pin is written in the configuration"},
		{"password from the environment", "file:" + encrypted.SignKey + "?password-env=GMGATE_TEST_KEY_PASSWORD", "does not belong to sign_cert"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfgFile := filepath.Join(t.TempDir(), "gmgate.yaml")
			cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off", level: debug}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: "%s"
      enc_cert: %s
      enc_key: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:1"]}
`, served.SignCert, c.signKey, served.EncCert, served.EncKey)
			if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"serve", "-c", cfgFile}, {"config", "check", "-c", cfgFile}} {
				out, err := gmgateCommand(args...).CombinedOutput()
				if err == nil {
					t.Errorf("%s started:\n%s", args[0], out)
					continue
				}
				if !strings.Contains(string(out), c.want) {
					t.Errorf("%s: the output does not say %q:\n%s", args[0], c.want, out)
				}
				lower := strings.ToLower(string(out))
				if strings.Contains(lower, strings.ToLower(secret)) || strings.Contains(lower, envSecret) {
					t.Errorf("%s: the output shows the secret:\n%s", args[0], out)
				}
			}
		})
	}
}

//go:build !cgo

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A binary built without cgo (the static release binaries) cannot load an
// SDF library: a configuration with an sdf: key is refused, by config
// check and serve alike, with the line, the library and how to get a
// binary that can, and without the card's PIN.
func TestSDFKeyRefusedWithoutCgo(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	cfg := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp:
      sign_cert: %q
      sign_key: "sdf:/opt/vendor/libsdf.so?index=1&key=sign&pin-env=GMGATE_TEST_CARD_PIN"
      enc_cert: %q
      enc_key: %q
    routes:
      - upstream: app
upstreams:
  app: {targets: ["http://127.0.0.1:9"]}
`, files.SignCert, files.EncCert, files.EncKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"config", "check", "-c", cfg}, {"serve", "-c", cfg}} {
		out, code := runGmgate(t, []string{"GMGATE_TEST_CARD_PIN=927461"}, args...)
		if code != exitConfig {
			t.Errorf("%s: exit %d, want %d:\n%s", strings.Join(args, " "), code, exitConfig, out)
		}
		for _, want := range []string{cfg + ":7: listeners[0].tlcp.sign_key", "built without cgo", "/opt/vendor/libsdf.so", "CGO_ENABLED=1"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", strings.Join(args, " "), want, out)
			}
		}
		if strings.Contains(out, "927461") {
			t.Errorf("%s: the PIN is in the output:\n%s", strings.Join(args, " "), out)
		}
	}
}

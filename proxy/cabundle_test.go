package proxy

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/config"
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

package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/config"
)

// Each way log.access cannot be opened gets the fix for that way.
func TestAccessLogProblemFix(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, access, msg, fix string
	}{
		{"directory", dir, "is a directory", "name a file in it, such as " + filepath.Join(dir, "access.log")},
		{"missing directory", filepath.Join(dir, "missing", "access.log"), "no such file or directory", "create the directory " + filepath.Join(dir, "missing") + " writable by the user gmgate runs as, or log to stdout"},
		{"file as directory", filepath.Join(file, "access.log"), "not a directory", file + " is a file, not a directory: choose a path in a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(p, "http://127.0.0.1:1")
			cfg.Log.Access = c.access
			_, err := Check(cfg, CheckOptions{})
			var ce *config.Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("Check = %v, want one problem", err)
			}
			got := ce.Problems[0]
			if got.Path != "log.access" || !strings.Contains(got.Msg, c.msg) || !strings.HasPrefix(got.Fix, c.fix) {
				t.Errorf("problem %q (%q, fix %q), want log.access with %q, fix %q", got.Path, got.Msg, got.Fix, c.msg, c.fix)
			}
		})
	}
}

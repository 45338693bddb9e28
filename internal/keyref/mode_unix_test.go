//go:build unix

package keyref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLooseMode(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		mode os.FileMode
		want string
	}{
		{"private.key", 0o600, ""},
		{"owner-read-only.key", 0o400, ""},
		{"own-group.key", 0o640, ""},
		{"world.key", 0o644, "is readable by every user of the machine (mode 0644)"},
		{"world-rw.key", 0o666, "is readable and writable by every user of the machine (mode 0666)"},
		{"world-w.key", 0o602, "is writable by every user of the machine (mode 0602)"},
	} {
		p := file(tc.name, tc.mode)
		problem, fix := LooseMode(p, p)
		if tc.want == "" {
			if problem != "" || fix != "" {
				t.Errorf("%s: %q %q", tc.name, problem, fix)
			}
			continue
		}
		if !strings.HasPrefix(problem, p+" ") || !strings.Contains(problem, tc.want) || fix != "chmod 600 "+p+" (or chmod 640 with the group gmgate runs as: chgrp gmgate "+p+")" {
			t.Errorf("%s: %q %q, want %q", tc.name, problem, fix, tc.want)
		}
	}
	// A group gmgate does not run with; only root may give a file away.
	if os.Geteuid() == 0 {
		p := file("other-group.key", 0o640)
		if err := os.Chown(p, 0, 54321); err != nil {
			t.Fatal(err)
		}
		if problem, _ := LooseMode(p, p); !strings.Contains(problem, "is readable by the members of its group (mode 0640)") {
			t.Errorf("other group: %q", problem)
		}
	}
	// A path that is not to be shown.
	p := file("pw", 0o604)
	if problem, fix := LooseMode(p, "the password-file of sign_key"); problem != "the password-file of sign_key is readable by every user of the machine (mode 0604); a secret should be readable by the user gmgate runs as alone" || strings.Contains(fix, p) {
		t.Errorf("shown otherwise: %q %q", problem, fix)
	}
	// What cannot be examined is no warning.
	if problem, fix := LooseMode(filepath.Join(dir, "missing"), "missing"); problem != "" || fix != "" {
		t.Errorf("missing file: %q %q", problem, fix)
	}
	if problem, _ := LooseMode(dir, dir); problem != "" {
		t.Errorf("a directory: %q", problem)
	}
}

//go:build unix

package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// The session store's keys and password files that every user may read
// check ok with a warning naming the field, the file, its mode and the fix.
func TestCheckSessionStoreSecretFileModes(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	dir := tempDir(t)
	mr := miniredis.RunT(t)
	mr.RequireAuth("redis secret")
	keys := writeKeys(t, dir, "session.keys", testSealKey1)
	pw := filepath.Join(dir, "redis.password")
	if err := os.WriteFile(pw, []byte("redis secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := sharedConfig(p, up, mr.Addr(), keys)
	cfg.SessionStore.Redis.PasswordFile = pw
	loose := func(res *CheckResult) []string {
		var out []string
		for _, w := range res.Warnings {
			if strings.Contains(w.String(), "mode 0") {
				out = append(out, w.String())
			}
		}
		return out
	}
	res, err := Check(cfg, CheckOptions{})
	if err != nil || len(loose(res)) != 0 {
		t.Fatalf("private files: %v, %v", err, res.Warnings)
	}
	for _, f := range []string{keys, pw} {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err = Check(cfg, CheckOptions{})
	if err != nil {
		t.Fatalf("loose modes are not an error: %v", err)
	}
	w := loose(res)
	if len(w) != 2 ||
		!strings.Contains(w[0], "session_store.keys_file: "+keys+" is readable by every user of the machine (mode 0644)") || !strings.Contains(w[0], "chmod 600 "+keys) ||
		!strings.Contains(w[1], "session_store.redis.password_file: "+pw+" is readable by every user of the machine (mode 0644)") {
		t.Errorf("warnings: %q", w)
	}
}

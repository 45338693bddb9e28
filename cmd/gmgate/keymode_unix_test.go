//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Key and password files that every user may read are accepted with a
// warning naming the file, its mode and the fix, in config check and in
// serve's log, as ssh warns of a loose private key; private files give
// none.
func TestKeyFilesOthersCanRead(t *testing.T) {
	p := newCheckPKI(t)
	l := p.listener("edge", "127.0.0.1:0")
	pw := filepath.Join(p.dir, "password")
	if err := os.WriteFile(pw, []byte("right password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.signCert, l.signKey = p.encrypted.SignCert, "file:"+p.encrypted.SignKey+"?password-file="+pw
	l.encCert, l.encKey = p.encrypted.EncCert, "file:"+p.encrypted.EncKey+"?password-file="+pw
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(configYAML("127.0.0.1:0", l)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runGmgate(t, nil, "config", "check", "-c", file)
	if code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("private files: exit %d\n%s", code, out)
	}
	for _, f := range []string{p.encrypted.SignKey, pw, p.tlsKey} {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"listeners[0].tlcp: sign_key " + p.encrypted.SignKey + " is readable by every user of the machine (mode 0644); a secret should be readable by the user gmgate runs as alone; chmod 600 " + p.encrypted.SignKey,
		"listeners[0].tlcp: the password-file of sign_key is readable by every user of the machine (mode 0644)",
		"listeners[0].tlcp: the password-file of enc_key is readable by every user of the machine (mode 0644)",
		"listeners[0].tls: key " + p.tlsKey + " is readable by every user of the machine (mode 0644)",
	}
	out, code = runGmgate(t, nil, "config", "check", "-c", file)
	if code != 0 || !strings.Contains(out, file+": ok") {
		t.Errorf("loose modes are not an error: exit %d\n%s", code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("config check lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, pw) {
		t.Errorf("the path in a key reference's query is shown:\n%s", out)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", file), "edge")
	for _, w := range want {
		srv.waitLog(t, w[strings.Index(w, ": ")+2:])
	}
}

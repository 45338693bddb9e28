package certs

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// asNobody runs f with its file accesses checked as user nobody: root's
// own reads pass over permission bits. The file system user ID is the
// calling thread's, so f must not hand its reads to other goroutines.
func asNobody(f func()) {
	if os.Geteuid() == 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		syscall.Setfsuid(65534)
		defer syscall.Setfsuid(0)
	}
	f()
}

// A file the user gmgate runs as may not read (a key written 0600 by
// root, the unit running as gmgate) is named with its field and the fix.
func TestLoadUnreadableFiles(t *testing.T) {
	dir, err := os.MkdirTemp("", "unreadable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t, false)
	plain := writeTestPair(t, ca, dir, "plain", nil, "plain.example.cn")
	enc := writeTestPair(t, ca, dir, "enc", []byte("pw"), "enc.example.cn")
	pwFile := dir + "/pw"
	for _, f := range []string{plain.SignCert, plain.SignKey, plain.EncCert, plain.EncKey, enc.EncCert, enc.EncKey} {
		os.Chmod(f, 0o644)
	}
	os.WriteFile(pwFile, []byte("pw"), 0o644)
	withPW := func(key string) string { return "file:" + key + "?password-file=" + pwFile }
	for _, c := range []struct {
		name, field, file string
		files             TLCPFiles
	}{
		{"key", "sign_key", plain.SignKey, files(plain)},
		{"certificate", "enc_cert", plain.EncCert, files(plain)},
		{"password file", "enc_key", pwFile, TLCPFiles{SignCert: plain.SignCert, SignKey: plain.SignKey, EncCert: enc.EncCert, EncKey: withPW(enc.EncKey)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Chmod(c.file, 0)
			defer os.Chmod(c.file, 0o644)
			var err error
			asNobody(func() { _, _, err = LoadTLCPFiles(c.files, LoadOptions{}) })
			if err == nil {
				t.Fatal("loaded")
			}
			wantAll(t, err.Error(), c.field, c.file, "permission denied", "readable by the user gmgate runs as")
		})
	}
}

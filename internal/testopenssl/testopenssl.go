// Package testopenssl runs the openssl command in interoperability tests.
//
// It is for tests only. It imports nothing but the standard library.
package testopenssl

import (
	"os/exec"
	"strings"
	"testing"
)

// Bin returns the openssl binary, or skips the test when it is not
// installed (CI installs it).
func Bin(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed; install OpenSSL 3 (apt-get install openssl) to run the OpenSSL interop tests")
	}
	return path
}

// Run runs openssl in dir and returns its combined output, failing the
// test when it exits non-zero.
func Run(t testing.TB, bin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

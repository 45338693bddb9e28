package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runCLI runs gmgate with args and returns its output and error. The
// commands are package globals, so every flag is first put back to its
// default: each run sees only its own arguments.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	resetFlags(rootCmd)
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&out)
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	return out.String(), err
}

func resetFlags(c *cobra.Command) {
	reset := func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			// Empty, not the default: a slice flag set before appends
			// to what it holds, and the commands take an empty list as
			// the default.
			_ = sv.Replace(nil)
		} else {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	}
	c.Flags().VisitAll(reset)
	c.PersistentFlags().VisitAll(reset)
	for _, sub := range c.Commands() {
		resetFlags(sub)
	}
}

func TestCertCommands(t *testing.T) {
	dir := t.TempDir()
	ca, site := filepath.Join(dir, "ca"), filepath.Join(dir, "site")
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("key password\n"), 0o600)

	if out, err := runCLI(t, "cert", "init-ca", "--out", ca, "--intermediate"); err != nil {
		t.Fatalf("init-ca: %v\n%s", err, out)
	}
	out, err := runCLI(t, "cert", "issue", "--ca", ca, "--dns", "api.example.cn,www.example.cn", "--ip", "10.0.0.5", "--out", site, "--key-password-file", pw)
	if err != nil {
		t.Fatalf("issue: %v\n%s", err, out)
	}
	sign := filepath.Join(site, "api.example.cn.sign.crt")
	enc := filepath.Join(site, "api.example.cn.enc.crt")
	if !strings.Contains(out, "sign_cert: "+sign) {
		t.Errorf("issue output:\n%s", out)
	}
	if out, err := runCLI(t, "cert", "issue", "--ca", ca, "--dns", "api.example.cn", "--out", site, "--key-password-file", ""); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second issue: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cert", "inspect", "--ca", filepath.Join(ca, "ca.crt"), "--key-password-file", pw, sign, filepath.Join(site, "api.example.cn.sign.key"))
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"SM2 signing certificate", "DNS:api.example.cn, DNS:www.example.cn, IP:10.0.0.5", "digitalSignature, nonRepudiation", "sha256:", "PBES2, PBKDF2 (hmacWithSM3", "belongs to:"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "cert", "verify", "--ca", filepath.Join(ca, "ca.crt"), "--host", "www.example.cn", "--enc", enc, sign)
	if err != nil || !strings.Contains(out, "pair OK") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	_, err = runCLI(t, "cert", "verify", "--ca", filepath.Join(ca, "ca.crt"), "--host", "other.example.cn", "--enc", "", sign)
	if err == nil || !strings.Contains(err.Error(), `does not name host "other.example.cn"`) {
		t.Fatalf("verify wrong host: %v", err)
	}
	// An inspection that finds a mismatch exits non-zero.
	out, err = runCLI(t, "cert", "inspect", "--ca", "", "--key-password-file", pw, enc, filepath.Join(site, "api.example.cn.sign.key"))
	if err == nil || !strings.Contains(out, "key/certificate mismatch") {
		t.Fatalf("mismatch: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cert", "csr", "--dns", "gm.example.cn", "--out", filepath.Join(dir, "req"), "--key-password-file", "")
	if err != nil || !strings.Contains(out, "gm.example.cn.sign.csr") {
		t.Fatalf("csr: %v\n%s", err, out)
	}
}

func TestCertHelpHasExamples(t *testing.T) {
	for _, sub := range []string{"init-ca", "issue", "csr", "sign", "inspect", "verify", "migrate"} {
		out, err := runCLI(t, "cert", sub, "--help")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "Examples:") || !strings.Contains(out, "gmgate cert "+sub) {
			t.Errorf("%s --help has no working example:\n%s", sub, out)
		}
	}
}

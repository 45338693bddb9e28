package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/tlcp"
)

// tlcpServer serves handler over TLCP on loopback and returns its address,
// the CA file and a client pair.
func tlcpServer(t *testing.T, serve func(net.Listener)) (addr, caFile string, client pki.DualFiles) {
	t.Helper()
	dir := t.TempDir()
	ca, pair := localPKI(t, dir)
	cli, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if client, err = cli.Write(dir, "client", nil); err != nil {
		t.Fatal(err)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{*pair.Certificate()}, ClientAuth: tlcp.VerifyClientCertIfGiven, ClientCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); serve(ln) }()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), filepath.Join(dir, pki.CACertFile), client
}

// probeCmd runs gmgate probe and returns stdout, stderr and the exit code.
func probeCmd(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := gmgateCommand(append([]string{"probe"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestProbeCommandHTTP(t *testing.T) {
	addr, ca, client := tlcpServer(t, func(ln net.Listener) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "[host=%s ua=%s]", r.Host, r.UserAgent())
		})}
		_ = srv.Serve(ln)
	})
	url := "https://" + addr + "/"
	stdout, stderr, code := probeCmd(t, "", "--ca", ca, "-H", "Host: api.example.cn", "-H", "User-Agent: mine", "--resume", url)
	if code != 0 || stdout != "[host=api.example.cn ua=mine][host=api.example.cn ua=mine]" {
		t.Errorf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "> Host: api.example.cn") || !strings.Contains(stderr, "second connection resumed the session: yes") {
		t.Errorf("stderr:\n%s", stderr)
	}
	// --resolve: the URL names localhost; the connection goes to the
	// address given.
	_, port, _ := net.SplitHostPort(addr)
	stdout, stderr, code = probeCmd(t, "", "--ca", ca, "--resolve", "localhost:"+port+":127.0.0.1", "-s", "https://localhost:"+port+"/")
	if code != 0 || stdout != "[host=localhost:"+port+" ua=gmgate-probe]" {
		t.Errorf("--resolve: exit %d, %q %s", code, stdout, stderr)
	}
	// The signing certificate alone authenticates.
	if _, stderr, code := probeCmd(t, "", "--ca", ca, "--cert", client.SignCert, "--key", client.SignKey, url); code != 0 {
		t.Errorf("--cert alone: exit %d\n%s", code, stderr)
	}
	// The gmssl profile, which the server accepts too.
	if _, stderr, code := probeCmd(t, "", "--ca", ca, "--profile", "gmssl", "--cert", client.SignCert, "--key", client.SignKey,
		"--enc-cert", client.EncCert, "--enc-key", client.EncKey, "--suite", "ECDHE_SM4_GCM_SM3", url); code != 0 {
		t.Errorf("--profile gmssl: exit %d\n%s", code, stderr)
	}
	// Mistakes are reported with the flags' names.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert", client.SignCert}, "give --cert with --key"},
		{[]string{"--cert", client.SignCert, "--key", client.SignKey, "--enc-cert", client.EncCert}, "give --enc-cert with --enc-key"},
		{[]string{"--cert", client.SignCert, "--key", client.EncKey}, "--key " + client.EncKey + " does not belong to --cert " + client.SignCert},
		{[]string{"--cert", client.EncKey, "--key", client.SignKey}, "--cert " + client.EncKey},
		{[]string{"-H", "NoColon"}, `-H "NoColon"`},
		{[]string{"--send", `\q`}, "unknown escape"},
		{[]string{"--profile", "tongsuo"}, `--profile: unknown client profile "tongsuo"`},
		{[]string{"--ca", "missing-ca.crt"}, "--ca missing-ca.crt does not exist; give the path of the PEM file of the CA certificates (a relative path is relative to the current directory)"},
		{[]string{"--suite", "AES128"}, `--suite: unknown cipher suite "AES128" (known: ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3)`},
		{[]string{"--cert", "missing.crt", "--key", "missing.key"}, "--cert missing.crt does not exist; give the path of the PEM certificate file (a relative path is relative to the current directory)"},
	} {
		_, stderr, code := probeCmd(t, "", append(append([]string{"--ca", ca}, tc.args...), url)...)
		if code == 0 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "sign_cert") || strings.Contains(stderr, "enc_key") || strings.Contains(stderr, "configuration file") {
			t.Errorf("%v: exit %d, want %q in\n%s", tc.args, code, tc.want, stderr)
		}
	}
}

func TestProbeCommandRaw(t *testing.T) {
	addr, ca, _ := tlcpServer(t, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			in, _ := io.ReadAll(c)
			fmt.Fprintf(c, "+%q", in)
			c.Close()
		}
	})
	stdout, stderr, code := probeCmd(t, "", "--ca", ca, "--send", `PING\r\n\x00`, addr)
	if code != 0 || stdout != `+"PING\r\n\x00"` {
		t.Errorf("--send: exit %d, %q\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = probeCmd(t, "QUIT\r\n", "--ca", ca, "--raw", addr)
	if code != 0 || stdout != `+"QUIT\r\n"` {
		t.Errorf("--raw: exit %d, %q\n%s", code, stdout, stderr)
	}
}

func TestProbeCommandServerClosesWithoutAlert(t *testing.T) {
	addr := testnet.Serve(t, func(net.Conn) {})
	_, stderr, code := probeCmd(t, "", "-k", "https://"+addr+"/")
	if code != 1 || !strings.Contains(stderr, "the server closed the connection during the TLCP handshake without sending an alert: it may not speak TLCP on this port") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`PING\r\n`: "PING\r\n", `a\\b`: `a\b`, `\x00\x41\t`: "\x00A\t", "": "", `\0`: "\x00"} {
		if got, err := unescape(in); err != nil || string(got) != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{`\`, `\q`, `\x4`, `\xZZ`} {
		if _, err := unescape(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzUnescape(f *testing.F) {
	f.Add(`PING\r\n\x00`)
	f.Add(`\x`)
	f.Fuzz(func(t *testing.T, s string) {
		out, err := unescape(s)
		if err == nil && len(out) > len(s) {
			t.Fatalf("%q unescaped to %d bytes", s, len(out))
		}
	})
}

// TestProbeCommandSNI probes a listener with two sites by name: the URL's
// host goes out as SNI, so each name gets its own site, and the failures
// without SNI name the flags that change it.
func TestProbeCommandSNI(t *testing.T) {
	f := newSitesFixture(t, "api", "www")
	cfgFile := filepath.Join(f.dir, "gmgate.yaml")
	cfg := f.config(f.site("api", true, "")+f.site("www", false, ""), f.site("www", false, ""), "api", "www")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge", "strict")
	ca := filepath.Join(f.dir, pki.CACertFile)
	probe := func(listener, name string, args ...string) (string, string, int) {
		port := strconv.Itoa(srv.port(t, listener))
		url := "https://" + name + ":" + port + "/"
		return probeCmd(t, "", append(append([]string{"--ca", ca, "--resolve", name + ":" + port + ":127.0.0.1"}, args...), url)...)
	}
	for _, name := range []string{"api", "www"} {
		stdout, stderr, code := probe("edge", name+".example.cn", "--resume")
		if code != 0 || stdout != name+" HTTP/1.1"+name+" HTTP/1.1" || !strings.Contains(stderr, "second connection resumed the session: yes") {
			t.Errorf("%s: exit %d, %q\n%s", name, code, stdout, stderr)
		}
	}
	// --sni asks for another name than the URL's.
	if stdout, stderr, code := probe("edge", "api.example.cn", "--sni", "www.example.cn", "-H", "Host: www.example.cn"); code != 0 || stdout != "www HTTP/1.1" {
		t.Errorf("--sni: exit %d, %q\n%s", code, stdout, stderr)
	}
	// Without SNI the default site answers, with a certificate for
	// another name.
	for _, args := range [][]string{{"--no-sni"}, {"--profile", "gmssl"}} {
		_, stderr, code := probe("edge", "www.example.cn", args...)
		if code == 0 || !strings.Contains(stderr, "no SNI was sent") || !strings.Contains(stderr, "give --sni NAME") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	if stdout, stderr, code := probe("edge", "www.example.cn", "--profile", "gmssl", "--sni", "www.example.cn"); code != 0 || stdout != "www HTTP/1.1" {
		t.Errorf("--profile gmssl --sni: exit %d, %q\n%s", code, stdout, stderr)
	}
	// A listener without a default site refuses a client without SNI,
	// and one asking for a name it does not serve.
	if _, stderr, code := probe("strict", "www.example.cn", "--no-sni"); code == 0 || !strings.Contains(stderr, "the server has no default site and no SNI was sent (--no-sni): give --sni NAME") {
		t.Errorf("strict, --no-sni: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := probe("strict", "api.example.cn"); code == 0 || !strings.Contains(stderr, "the server serves no site named api.example.cn") {
		t.Errorf("strict, api: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := probe("edge", "www.example.cn", "--no-sni", "--sni", "www.example.cn"); code == 0 || !strings.Contains(stderr, "give one of them") {
		t.Errorf("--sni with --no-sni: exit %d\n%s", code, stderr)
	}
}

// TestProbeCommandClientCertificateHints probes a server that requires a
// client certificate: the refusal says that it asked, and what to change
// for the profile in use.
func TestProbeCommandClientCertificateHints(t *testing.T) {
	dir := t.TempDir()
	ca, pair := localPKI(t, dir)
	stranger, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := stranger.IssueDual(pki.IssueOptions{DNSNames: []string{"client.test"}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := cli.Write(t.TempDir(), "client", nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{*pair.Certificate()}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tlcp.Conn).Handshake()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	url := "https://" + ln.Addr().String() + "/"
	caFile := filepath.Join(dir, pki.CACertFile)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "the server asked for a client certificate and none was given: give --cert (and --enc-cert for the ECDHE suites)"},
		{[]string{"--cert", client.SignCert, "--key", client.SignKey}, "refused the answer of profile standard: check that it trusts the issuer of --cert; a GmSSL 3 server needs --profile gmssl"},
		{[]string{"--profile", "gmssl", "--cert", client.SignCert, "--key", client.SignKey}, "refused the answer of profile gmssl, which only GmSSL 3 servers take: for Tongsuo, gotlcp, gmgate and most servers use --profile standard"},
	} {
		_, stderr, code := probeCmd(t, "", append(append([]string{"--ca", caFile}, tc.args...), url)...)
		if code == 0 || !strings.Contains(stderr, "tlcp: remote error") || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %q in\n%s", tc.args, code, tc.want, stderr)
		}
	}
}

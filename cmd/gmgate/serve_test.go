package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/probe"
	"github.com/gmgate/gmgate/internal/testexec"
)

// TestHelperProcess is gmgate itself when the test binary is started by
// startGmgate; otherwise it does nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("GMGATE_HELPER_PROCESS") != "1" {
		return
	}
	var args []string
	for i, a := range os.Args {
		if a == "--" {
			args = os.Args[i+1:]
			break
		}
	}
	rootCmd.SetArgs(args)
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gmgate:", err)
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

func gmgateCommand(args ...string) *exec.Cmd {
	cmd := testexec.Self(append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "GMGATE_HELPER_PROCESS=1")
	return cmd
}

func TestServeRefusesConfigWithThreeMistakes(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gmgate.yaml")
	data, err := os.ReadFile("../../config/testdata/three-mistakes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := gmgateCommand("serve", "-c", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitConfig {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	text := string(out)
	// The three mistakes of the file, and the four certificate and key
	// files it names, which this machine does not have.
	for _, want := range []string{
		"configuration has 7 problems",
		cfg + ":6: listeners[0].tlcp.sign_cert: sign_cert /etc/gmgate/site.sign.crt does not exist",
		cfg + ":9: listeners[0].tlcp.enc_key: enc_key /etc/gmgate/site.enc.key does not exist",
		cfg + ":10: listeners[0].tlcp.cipher_suites: unknown field",
		cfg + ":13: listeners[0].routes[0].upstream: no upstream is called \"legacy\"",
		cfg + ":18: upstreams.legacy-api.health.interval: \"five seconds\" is not a duration",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "gmgate started") || strings.Contains(text, "listening") {
		t.Errorf("the process started serving:\n%s", text)
	}
	// config check says the same and exits the same.
	out, err = gmgateCommand("config", "check", "-c", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitConfig || strings.Count(string(out), cfg+":") != 7 {
		t.Errorf("config check: %v\n%s", err, out)
	}
	// The report starts on the prefix's line, not on a line of its own.
	if first, _, _ := strings.Cut(text, "\n"); first != "gmgate: configuration has 7 problems:" {
		t.Errorf("first line %q, want \"gmgate: configuration has 7 problems:\"", first)
	}
}

// A configuration file that cannot be read at all is a configuration
// error too: serve and config check exit with EX_CONFIG, so that systemd's
// RestartPreventExitStatus=78 does not restart gmgate every few seconds
// for a file that is missing or names a directory.
func TestServeUnreadableConfigFileExitsConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "missing.yaml"), "missing.yaml does not exist"},
		{"directory", dir, "is a directory"},
	} {
		for _, args := range [][]string{{"serve", "-c", tc.path}, {"config", "check", "-c", tc.path}} {
			out, err := gmgateCommand(args...).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitConfig {
				t.Errorf("%s: %v: exit %v, want %d\n%s", tc.name, args[:2], err, exitConfig, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("%s: %v: output lacks %q:\n%s", tc.name, args[:2], tc.want, out)
			}
		}
	}
}

// SIGTERM: the process stops accepting, finishes the request in flight,
// and exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "served by the upstream")
	}))
	defer up.Close()
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["%s"]}
`, files.SignCert, files.SignKey, files.EncCert, files.EncKey, up.URL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := gmgateCommand("serve", "-c", cfgFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logs := bufio.NewScanner(stderr)
	addr := ""
	for addr == "" && logs.Scan() {
		var line struct{ Msg, Addr string }
		if json.Unmarshal(logs.Bytes(), &line) == nil && line.Msg == "listening" {
			addr = line.Addr
		}
	}
	if addr == "" {
		t.Fatal("gmgate did not report its listener")
	}
	var rest strings.Builder
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		for logs.Scan() {
			rest.WriteString(logs.Text() + "\n")
		}
	}()

	url := "https://" + addr
	if res, err := probe.Run(context.Background(), probe.Options{URL: url + "/", CAFile: files.CACert}, nil); err != nil || res.Status != 200 {
		t.Fatalf("before SIGTERM: %v", err)
	}
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		res, err := probe.Run(context.Background(), probe.Options{URL: url + "/slow", CAFile: files.CACert}, nil)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{status: res.Status, body: string(res.Body)}
	}()
	<-entered
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Draining: new connections are refused while the request is in flight.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	r := <-done
	if r.err != nil || r.status != 200 || r.body != "served by the upstream" {
		t.Fatalf("in-flight request: %+v", r)
	}
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, rest.String())
	}
	if !strings.Contains(rest.String(), `"msg":"shut down"`) {
		t.Errorf("no shutdown log line:\n%s", rest.String())
	}
}

// The quick start as a user follows it: serve --upstream in front of their
// service, the printed probe and curl commands, then the written
// configuration with serve -c.
func TestServeUpstreamQuickStart(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "the user's service, reached with %s", r.Header.Get("X-TLCP-Protocol"))
	}))
	defer up.Close()
	state := filepath.Join(t.TempDir(), "state")

	cmd := gmgateCommand("serve", "--upstream", up.URL, "--state", state, "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var printed strings.Builder
	for lines.Scan() && !strings.Contains(lines.Text(), "Stop with Ctrl-C") {
		printed.WriteString(lines.Text() + "\n")
	}
	go func() {
		for lines.Scan() {
		}
	}()
	text := printed.String()
	probeLine := regexp.MustCompile(`\S+ probe --ca (\S+) (https://\S+)`).FindStringSubmatch(text)
	curlLine := regexp.MustCompile(`curl --cacert (\S+) (https://\S+)`).FindStringSubmatch(text)
	serveLine := regexp.MustCompile(`\S+ serve -c (\S+)`).FindStringSubmatch(text)
	if probeLine == nil || curlLine == nil || serveLine == nil {
		t.Fatalf("instructions:\n%s\n%s", text, stderr.String())
	}
	cfgFile := serveLine[1]
	if cfgFile != filepath.Join(state, "gmgate.yaml") {
		t.Errorf("configuration written to %s", cfgFile)
	}
	probeAgain := func(when string) {
		t.Helper()
		out, err := gmgateCommand("probe", "-s", "--ca", probeLine[1], probeLine[2]).Output()
		if err != nil || string(out) != "the user's service, reached with tlcp" {
			t.Errorf("%s: probe as printed: %v %q", when, err, out)
		}
	}
	probeAgain("serve --upstream")
	// The curl command, with curl where it is installed, and with Go's
	// TLS client the same way.
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(curlLine[1])
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(curlLine[2])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "the user's service, reached with tls1.3" {
		t.Errorf("TLS: %q", body)
	}
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-s", "--cacert", curlLine[1], curlLine[2]).Output()
		if err != nil || string(out) != "the user's service, reached with tls1.3" {
			t.Errorf("curl as printed: %v %q", err, out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}

	// The next step: the file it wrote.
	if out, err := gmgateCommand("config", "check", "-c", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	again := gmgateCommand("serve", "-c", cfgFile)
	logs, err := again.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	again.Stdout = io.Discard
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	defer again.Process.Kill()
	sc := bufio.NewScanner(logs)
	listening := false
	for !listening && sc.Scan() {
		var line struct{ Msg, Listener string }
		listening = json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener == "edge"
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if !listening {
		t.Fatal("serve -c did not report its listener")
	}
	probeAgain("serve -c")
	again.Process.Signal(syscall.SIGTERM)
	if err := again.Wait(); err != nil {
		t.Errorf("serve -c exit: %v", err)
	}

	// The user edits the file: the quick start no longer writes over it,
	// and says how to serve it. An unedited file is written anew.
	edited, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	edited = append(edited, []byte("# the user's own line\n")...)
	if err := os.WriteFile(cfgFile, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := gmgateCommand("serve", "--upstream", up.URL, "--state", state, "--listen", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "has changed since gmgate serve --upstream wrote it") || !strings.Contains(string(out), "gmgate serve -c "+cfgFile) {
		t.Errorf("serve --upstream over an edited file: %v\n%s", err, out)
	}
	if now, _ := os.ReadFile(cfgFile); !bytes.Equal(now, edited) {
		t.Errorf("the edited file was changed:\n%s", now)
	}

	// A scheme the quick start does not front.
	if out, err := gmgateCommand("serve", "--upstream", "tcp://127.0.0.1:5432", "--state", state).CombinedOutput(); err == nil || !strings.Contains(string(out), "fronts an HTTP service") {
		t.Errorf("tcp upstream: %v\n%s", err, out)
	}
}

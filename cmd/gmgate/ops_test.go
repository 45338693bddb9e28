package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/probe"
	"github.com/gmgate/gmgate/internal/testnet"
)

// namedUpstream answers every request with its name.
func namedUpstream(t testing.TB, name string) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, name)
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// fetch gets path from the gateway over TLCP and returns the body.
func fetch(t *testing.T, addr, caFile, path string) string {
	t.Helper()
	res, err := probe.Run(context.Background(), probe.Options{URL: "https://" + addr + path, CAFile: caFile}, nil)
	if err != nil {
		t.Fatalf("GET %s over TLCP: %v", path, err)
	}
	return string(res.Body)
}

// serveConfig is a TLCP listener on addr in front of upstream, with the
// access log in accessLog ("off" for none).
func serveConfig(files pki.DualFiles, addr, upstream, accessLog string) string {
	return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: %q}
listeners:
  - name: edge
    listen: %q
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
      client_ca: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, accessLog, addr, files.SignCert, files.SignKey, files.EncCert, files.EncKey, files.CACert, upstream)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testnet.FreePort(t))
}

// execReload returns the ExecReload= commands of deploy/gmgate.service
// with the installed paths replaced by this test's, as systemd would run
// them for the process pid.
func execReload(t *testing.T, cfgFile string, pid int) [][]string {
	t.Helper()
	unit, err := os.ReadFile("../../deploy/gmgate.service")
	if err != nil {
		t.Fatal(err)
	}
	self := gmgateCommand()
	var cmds [][]string
	for _, line := range strings.Split(string(unit), "\n") {
		v, ok := strings.CutPrefix(line, "ExecReload=")
		if !ok {
			continue
		}
		var argv []string
		for _, f := range strings.Fields(v) {
			switch f {
			case "/usr/local/bin/gmgate":
				argv = append(argv, self.Args...)
			case "/etc/gmgate/gmgate.yaml":
				argv = append(argv, cfgFile)
			case "$MAINPID":
				argv = append(argv, strconv.Itoa(pid))
			default:
				argv = append(argv, f)
			}
		}
		cmds = append(cmds, argv)
	}
	if len(cmds) != 2 || !strings.Contains(strings.Join(cmds[0], " "), "config check") {
		t.Fatalf("unexpected ExecReload lines: %v", cmds)
	}
	return cmds
}

// The unit restarts gmgate when it fails, but not when the configuration
// (or a key or PIN it names) is wrong: systemd learns which from serve's
// exit status, and only serve's (RestartPreventExitStatus= looks at the
// main process alone), so no ExecStartPre may open keys or cards first.
func TestServiceRestartPolicy(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/gmgate.service")
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			settings[k] = append(settings[k], v)
		}
	}
	if got := settings["Restart"]; !slices.Equal(got, []string{"on-failure"}) {
		t.Errorf("Restart=%v, want on-failure", got)
	}
	if got := settings["RestartPreventExitStatus"]; len(got) != 1 || !slices.Contains(strings.Fields(got[0]), strconv.Itoa(exitConfig)) {
		t.Errorf("RestartPreventExitStatus=%v, want it to hold %d", got, exitConfig)
	}
	if got := settings["ExecStartPre"]; len(got) != 0 {
		t.Errorf("ExecStartPre=%v: its failures are restarted whatever their status", got)
	}
	if got := settings["ExecStart"]; len(got) != 1 || !strings.Contains(got[0], "gmgate serve") {
		t.Errorf("ExecStart=%v", got)
	}
}

// runExecReload runs the commands in order and stops at the first that
// fails, as systemd does; it returns the index of the failed one (-1).
func runExecReload(t *testing.T, cmds [][]string) (int, string) {
	t.Helper()
	for i, argv := range cmds {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "GMGATE_HELPER_PROCESS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return i, string(out)
		}
	}
	return -1, ""
}

// The unit's ExecReload gate: a good edit passes the check (the ports the
// running gmgate holds count as free) and reaches the process; a broken
// edit fails the check, SIGHUP is not sent, and the running
// configuration stays.
func TestServiceExecReloadGate(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	other := writeDualPair(t, t.TempDir())
	addr := freeAddr(t)
	access := filepath.Join(dir, "access.log")
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	write := func(cfg string) {
		// Replace the file as an editor does; the watcher may reload it
		// too, which changes nothing below.
		tmp := cfgFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgFile); err != nil {
			t.Fatal(err)
		}
	}
	write(serveConfig(files, addr, namedUpstream(t, "first"), access))
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge")
	pid := srv.cmd.Process.Pid
	if got := fetch(t, addr, files.CACert, "/"); got != "first" {
		t.Fatalf("served %q", got)
	}

	write(serveConfig(files, addr, namedUpstream(t, "second"), access))
	if failed, out := runExecReload(t, execReload(t, cfgFile, pid)); failed >= 0 {
		t.Fatalf("ExecReload %d failed on a good edit:\n%s", failed, out)
	}
	srv.waitLog(t, `"msg":"access log reopened"`) // SIGHUP arrived
	waitFor(t, func() bool { return fetch(t, addr, files.CACert, "/") == "second" })

	broken := serveConfig(files, addr, namedUpstream(t, "third"), access)
	broken = strings.Replace(broken, "sign_key: "+files.SignKey, "sign_key: "+other.SignKey, 1)
	write(broken)
	failed, out := runExecReload(t, execReload(t, cfgFile, pid))
	if failed != 0 {
		t.Fatalf("the check passed a broken edit (failed at %d):\n%s", failed, out)
	}
	if !strings.Contains(out, "listeners[0].tlcp.sign_key: sign_key "+other.SignKey+" does not belong to sign_cert") {
		t.Errorf("the check does not say why:\n%s", out)
	}
	// The file watcher saw the broken edit too: wait until its reload
	// has failed, then check that the running configuration stayed.
	srv.waitLog(t, `reload failed; the previous configuration stays in service`)
	if got := fetch(t, addr, files.CACert, "/"); got != "second" {
		t.Errorf("after the broken edit the gateway serves %q", got)
	}
	if n := strings.Count(srv.logs.String(), `"msg":"access log reopened"`); n != 1 {
		t.Errorf("SIGHUP sent %d times", n)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("gave up waiting")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Relative paths in the file are relative to the file's directory,
// whatever the working directory: systemd starts gmgate from /.
func TestServeFromAnotherDirectoryWithRelativePaths(t *testing.T) {
	etc := t.TempDir()
	if err := os.Mkdir(filepath.Join(etc, "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := writeDualPair(t, filepath.Join(etc, "certs"))
	rel := pki.DualFileNames("certs", "localhost")
	rel.CACert = "certs/ca.crt"
	addr := freeAddr(t)
	cfgFile := filepath.Join(etc, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(serveConfig(rel, addr, namedUpstream(t, "app"), "logs/access.log")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(etc, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	check := gmgateCommand("config", "check", "-c", cfgFile)
	check.Dir = elsewhere
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("config check from another directory: %v\n%s", err, out)
	}
	cmd := gmgateCommand("serve", "-c", cfgFile)
	cmd.Dir = elsewhere
	startServe(t, cmd, "edge")
	if got := fetch(t, addr, files.CACert, "/"); got != "app" {
		t.Fatalf("served %q", got)
	}
	waitFor(t, func() bool {
		data, _ := os.ReadFile(filepath.Join(etc, "logs", "access.log"))
		return strings.Contains(string(data), `"msg":"request"`)
	})
	if _, err := os.Stat(filepath.Join(elsewhere, "logs")); err == nil {
		t.Error("the access log followed the working directory")
	}
	// config show prints the paths resolved.
	show := gmgateCommand("config", "show", "-c", cfgFile)
	show.Dir = elsewhere
	out, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "sign_cert: "+files.SignCert) || !strings.Contains(string(out), "access: "+filepath.Join(etc, "logs", "access.log")) {
		t.Errorf("config show:\n%s", out)
	}
}

// logrotate's way: rename the access log, SIGUSR1, and the next lines go
// to a new file of the configured name.
func TestServeReopensAccessLogOnSIGUSR1(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	addr := freeAddr(t)
	access := filepath.Join(dir, "access.log")
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(serveConfig(files, addr, namedUpstream(t, "app"), access)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", cfgFile), "edge")
	fetch(t, addr, files.CACert, "/before")
	waitFor(t, func() bool {
		data, _ := os.ReadFile(access)
		return strings.Contains(string(data), `"path":"/before"`)
	})
	if err := os.Rename(access, access+".1"); err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	srv.waitLog(t, `"msg":"access log reopened"`)
	fetch(t, addr, files.CACert, "/after")
	waitFor(t, func() bool {
		data, _ := os.ReadFile(access)
		return strings.Contains(string(data), `"path":"/after"`)
	})
	old, _ := os.ReadFile(access + ".1")
	if strings.Contains(string(old), "/after") || !strings.Contains(string(old), "/before") {
		t.Errorf("rotated file:\n%s", old)
	}
	if srv.cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Error("SIGUSR1 ended the process")
	}
}

// The sd_notify datagrams systemd reads (Type=notify): READY=1 once the
// listeners are bound, RELOADING=1 with MONOTONIC_USEC then READY=1
// around a reload, STOPPING=1 on SIGTERM.
func TestServeNotifiesSystemd(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	addr := freeAddr(t)
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(serveConfig(files, addr, namedUpstream(t, "app"), "off")), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	datagrams := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(datagrams)
				return
			}
			datagrams <- string(buf[:n])
		}
	}()
	next := func(want string) string {
		t.Helper()
		select {
		case d := <-datagrams:
			if !strings.HasPrefix(d, want) {
				t.Fatalf("notification %q, want %q", d, want)
			}
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s notification", want)
		}
		return ""
	}

	cmd := gmgateCommand("serve", "-c", cfgFile)
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+sock)
	srv := startServe(t, cmd, "edge")
	next("READY=1")
	// Ready means served: a client gets through.
	fetch(t, addr, files.CACert, "/")

	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloading := next("RELOADING=1")
	usec, ok := strings.CutPrefix(strings.TrimPrefix(reloading, "RELOADING=1"), "\nMONOTONIC_USEC=")
	if n, err := strconv.ParseInt(usec, 10, 64); !ok || err != nil || n <= 0 {
		t.Errorf("RELOADING notification %q has no MONOTONIC_USEC", reloading)
	}
	next("READY=1")

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next("STOPPING=1")
	<-srv.exited
	if srv.err != nil {
		t.Errorf("exit after SIGTERM: %v", srv.err)
	}
}

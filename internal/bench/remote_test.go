package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testexec"
	"github.com/gmgate/gmgate/internal/testnet"
)

// rsaTLSServer is a TLS server with an RSA-2048 certificate that is not
// gmgate: each connection gets a handshake and is read until it closes.
func rsaTLSServer(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyRSA2048})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueTLS(pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := leaf.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*cert}}
	return testnet.Serve(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, tls.Server(c, cfg))
	})
}

// Against an RSA server the TLS rows say RSA-2048, not the ECDSA of the
// self-started server.
func TestHandshakeRowsNameWhatWasNegotiated(t *testing.T) {
	opts := quickOptions(t, "TLS1.3,TLS1.2,TLS1.2-X25519")
	opts.Target = rsaTLSServer(t)
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"TLS1.3 X25519 RSA-2048", "TLS1.2 P-256 RSA-2048", "TLS1.2 X25519 RSA-2048"} {
		res := rep.Results[i]
		checkConsistent(t, res, opts.Concurrency)
		if res.Name != want || res.Negotiated[want] != res.Handshakes || strings.Contains(res.Name, "ECDSA") {
			t.Errorf("row %d: %q (requested %q), negotiated %v", i, res.Name, res.Requested, res.Negotiated)
		}
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	if !strings.Contains(table.String(), "TLS1.3 X25519 RSA-2048") {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestParseProcStat(t *testing.T) {
	st, err := parseProcStat([]byte("4242 (my (odd) server) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 4 0 100 0 0\n"))
	if err != nil || st.ppid != 17 || st.cpu != 250+50+7+3 {
		t.Errorf("%+v %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S p 1 1 0 -1 0 0 0 0 0 a 0 0 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A tree in a /proc of files: the root, a child, a grandchild, and a
// process outside the tree.
func TestProcessTreeCPUIn(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, ppid int, utime, stime, cutime, cstime int) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		os.MkdirAll(dir, 0o755)
		line := fmt.Sprintf("%d (srv) S %d 1 1 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0 1 0 0\n", pid, ppid, utime, stime, cutime, cstime)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644)
	}
	write(100, 1, 10, 5, 20, 5) // 40 ticks, 25 of them reaped children
	write(101, 100, 100, 0, 0, 0)
	write(102, 101, 30, 10, 0, 0)
	write(200, 1, 999, 999, 0, 0)
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)
	got, err := processTreeCPUIn(proc, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 180 * time.Second / userHZ; got != want {
		t.Errorf("tree CPU %s, want %s", got, want)
	}
	if _, err := processTreeCPUIn(proc, 300); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Errorf("missing PID: %v", err)
	}
}

// The CPU time of a real process tree: live children and reaped ones.
func TestProcessTreeCPUOfAShell(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// A child that burns CPU for a while, then exits and is reaped, then
	// another that burns CPU and stays alive; the shell itself only waits.
	cmd := exec.Command(sh, "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done & wait; echo reaped; while :; do :; done & echo live; wait`)
	// Its own process group, so that the shell and its children end
	// together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	lines := make([]byte, 0, 64)
	buf := make([]byte, 64)
	for !bytes.Contains(lines, []byte("live\n")) {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, buf[:n]...)
	}
	reaped, err := processTreeCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if reaped <= 0 {
		t.Errorf("a reaped child's CPU time is missing: %s", reaped)
	}
	// The live child's CPU time must show up in the tree's total. On a
	// loaded machine it gets the CPU only now and then, so wait for it
	// (bounded) rather than for a fixed time.
	var later time.Duration
	for start := time.Now(); time.Since(start) < 20*time.Second; {
		time.Sleep(100 * time.Millisecond)
		if later, err = processTreeCPU(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if later-reaped >= 100*time.Millisecond {
			break
		}
	}
	if later-reaped < 100*time.Millisecond {
		t.Errorf("a live child busy for 20s added only %s", later-reaped)
	}
}

// --server-pid measures a server on this machine: here the test process
// itself, which shares the load generator's CPUs, as the report warns.
func TestHandshakeServerPID(t *testing.T) {
	if testexec.Emulated() {
		t.Skip("under the emulator this process's /proc/PID/stat is the emulator's, with no CPU times (TestProcessTreeCPUOfAShell reads other processes')")
	}
	srv := startTestServer(t, "tlcp")
	opts := quickOptions(t, "ECC_SM4_GCM_SM3")
	opts.Launcher = nil
	opts.Target = srv.ln.Addr().String()
	opts.ServerPID = os.Getpid()
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, opts.Concurrency)
	allowed, _ := allowedCPUs()
	if rep.Server.CPUSource != fmt.Sprintf("/proc/%d", os.Getpid()) || res.ServerCPUSeconds <= 0 || res.HandshakesPerServerCPUSecond <= 0 ||
		rep.Server.Cores != len(allowed) || res.ServerBusy <= 0 {
		t.Errorf("server %+v, result %+v", rep.Server, res)
	}
	if !slices.Equal(rep.Load.CPUs, allowed) {
		t.Errorf("load generator CPUs %v, this process may use %v", rep.Load.CPUs, allowed)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "they share CPUs") }) {
		t.Errorf("no warning about shared CPUs: %q", rep.Warnings)
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	for _, want := range []string{"/stat, the process and its children", "busy share over", fmt.Sprintf("load generator on CPUs %s (%d of %d)", cpuList(allowed), len(allowed), rep.Machine.NumCPU), "WARNING: "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	for _, bad := range []HandshakeOptions{{Target: opts.Target, ServerPID: 1, MetricsURL: "http://x/metrics"}, {ServerPID: 1}} {
		bad.Scenarios = opts.Scenarios
		if _, err := RunHandshake(context.Background(), bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// A server given all of this process's CPUs shares them with the load
// generator; the report says so.
func TestHandshakeWarnsOfSharedCPUs(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	opts := quickOptions(t, "ECC_SM4_GCM_SM3")
	opts.ServerCores = len(allowed)
	opts.PinLoadGenerator = true
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w string) bool {
		return strings.Contains(w, fmt.Sprintf("the server has all %d CPUs this process may use", len(allowed)))
	}) {
		t.Errorf("warnings %q", rep.Warnings)
	}
}

func TestSaturationWarnings(t *testing.T) {
	rs := []ScenarioResult{
		{Scenario: Scenario{Name: "busy"}, ServerBusy: 0.97},
		{Scenario: Scenario{Name: "idle"}, ServerBusy: 0.4, LoadBusy: 0.99},
		{Scenario: Scenario{Name: "unknown"}},
		{Scenario: Scenario{Name: "crowded"}, ServerBusy: 0.5, LoadBusy: 0.6},
	}
	w := saturationWarnings(rs, false)
	if len(w) != 2 || !strings.HasPrefix(w[0], "idle: the server was busy 40%") || !strings.Contains(w[0], "the load generator was busy 99%") ||
		!strings.Contains(w[1], "other work on this machine took their CPUs") {
		t.Errorf("%q", w)
	}
	if w := saturationWarnings(rs, true); len(w) != 2 || !strings.Contains(w[0], "--rate held the load back") {
		t.Errorf("paced: %q", w)
	}
}

// The pacer spaces starts at least an interval apart, however many wait
// and however late they come.
func TestPacerIsAnUpperBound(t *testing.T) {
	const rate = 200.0
	p := newPacer(rate)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var starts []time.Time
	p.onStart = func(t time.Time) { starts = append(starts, t) }
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; p.wait(ctx); n++ {
				// Workers stall now and then, as one whose connection
				// took long does; the next starts must not catch up.
				if n%3 == w%3 {
					time.Sleep(30 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	interval := time.Duration(float64(time.Second) / rate)
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < interval {
			t.Fatalf("starts %d and %d only %s apart", i-1, i, d)
		}
	}
	if len(starts) < 2 {
		t.Fatalf("%d starts", len(starts))
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (my (odd) server) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 4 0 100 0 0\n"))
	f.Add([]byte("1 (x) S"))
	f.Fuzz(func(t *testing.T, line []byte) {
		st, err := parseProcStat(line)
		if err != nil && st.cpu != 0 {
			t.Fatalf("error %v with CPU %d", err, st.cpu)
		}
	})
}

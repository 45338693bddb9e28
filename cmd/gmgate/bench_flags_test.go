package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/pflag"
)

// A numeric flag given a value it cannot take is refused with the flag,
// the value and what it accepts, before anything is started: the run's
// progress line never comes, and no gateway build is looked for.
func TestBenchRefusesNumericFlagsOutOfRange(t *testing.T) {
	gatewayBenchSetup(t)
	selfCommandFunc = func() (bench.GatewayCommand, error) {
		t.Error("a gateway benchmark started despite a refused flag")
		return nil, errors.New("refused flag reached the run")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"crypto", "--duration", "0"}, "--duration 0s: give a duration above 0"},
		{[]string{"crypto", "--duration", "-1s"}, "--duration -1s: give a duration above 0"},
		{[]string{"crypto", "--warmup", "-1ms"}, "--warmup -1ms: give 0 (no warm-up) or a longer duration"},
		{[]string{"crypto", "--retries", "-1"}, "--retries -1: give 0 (each figure once) or more"},
		{[]string{"crypto", "--cpu", "-1"}, "--cpu -1: give a CPU number, 0 or more"},
		{[]string{"crypto", "--sizes", "16,0"}, "--sizes 0: give multiples of 16 from 16 to 1048576 bytes"},
		{[]string{"crypto", "--sizes", "17"}, "--sizes 17: give multiples of 16 from 16 to 1048576 bytes"},
		{[]string{"handshake", "-d", "-5s"}, "--duration -5s: give a duration above 0"},
		{[]string{"handshake", "-d", "0"}, "--duration 0s: give a duration above 0"},
		{[]string{"handshake", "--warmup", "-1s"}, "--warmup -1s: give 0 (no warm-up) or a longer duration"},
		{[]string{"handshake", "-c", "0"}, "--concurrency 0: give 1 or more"},
		{[]string{"handshake", "--concurrency", "-3"}, "--concurrency -3: give 1 or more"},
		{[]string{"handshake", "--rounds", "0"}, "--rounds 0: give 1 or more"},
		{[]string{"handshake", "--timeout", "0s"}, "--timeout 0s: give a duration above 0"},
		{[]string{"handshake", "--timeout", "-2s"}, "--timeout -2s: give a duration above 0"},
		{[]string{"handshake", "--rate", "-1"}, "--rate -1: give 0 (no limit) or more"},
		{[]string{"handshake", "--rate", "+Inf"}, "--rate +Inf: give 0 (no limit) or more"},
		{[]string{"handshake", "--resume", "1.5"}, "--resume 1.5: give a number from 0 to 1"},
		{[]string{"handshake", "--resume", "NaN"}, "--resume NaN: give a number from 0 to 1"},
		{[]string{"handshake", "--http-body", "0"}, "--http-body 0: give 1 to 67108864 bytes"},
		{[]string{"handshake", "--http-body", "-1"}, "--http-body -1: give 1 to 67108864 bytes"},
		{[]string{"handshake", "--peak", "-10"}, "--peak -10: give 0 (no capacity lines) or more"},
		{[]string{"handshake", "--server-cores", "0"}, "--server-cores 0: give 1 or more"},
		{[]string{"handshake", "--server-pid", "0", "--target", "127.0.0.1:1"}, "--server-pid 0: give 1 or more"},
		{[]string{"proxy", "-d", "0"}, "--duration 0s: give a duration above 0"},
		{[]string{"proxy", "--warmup", "-1s"}, "--warmup -1s: give 0 (no warm-up) or a longer duration"},
		{[]string{"proxy", "--body", "0"}, "--body 0: give 1 or more bytes"},
		{[]string{"proxy", "--clients", "8,0"}, "--clients 0: give 1 to 10000"},
		{[]string{"proxy", "--clients", "10001"}, "--clients 10001: give 1 to 10000"},
		{[]string{"proxy", "--rounds", "-1"}, "--rounds -1: give 1 or more"},
		{[]string{"proxy", "--server-cores", "0"}, "--server-cores 0: give 1 or more"},
		{[]string{"download", "--size-mib", "0"}, "--size-mib 0: give 1 to 1048576 MiB"},
		{[]string{"download", "--size-mib", "-256"}, "--size-mib -256: give 1 to 1048576 MiB"},
		{[]string{"download", "--size-mib", "9007199254740993"}, "--size-mib 9007199254740993: give 1 to 1048576 MiB"},
		{[]string{"download", "--rounds", "0"}, "--rounds 0: give 1 or more"},
		{[]string{"idle-conns", "--conns", "0"}, "--conns 0: give 1 or more"},
		{[]string{"idle-conns", "--settle", "-3s"}, "--settle -3s: give 0 (no wait) or a longer duration"},
		{[]string{"idle-conns", "--rounds", "0"}, "--rounds 0: give 1 or more"},
	} {
		args := append([]string{"bench"}, tc.args...)
		out, err := runCLI(t, args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", strings.Join(args, " "), err, tc.want)
		}
		if strings.Contains(out, "measuring") {
			t.Errorf("%s: started measuring before refusing:\n%s", strings.Join(args, " "), out)
		}
	}
}

// A refused value exits as any other usage error does.
func TestBenchRefusedFlagExitStatus(t *testing.T) {
	status := func(args ...string) int {
		err := gmgateCommand(args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return ee.ExitCode()
	}
	want := status("bench", "handshake", "--no-such-flag")
	if got := status("bench", "handshake", "-d", "-5s"); got != want {
		t.Errorf("exit status %d for -d -5s, %d for an unknown flag", got, want)
	}
}

// Every numeric flag of the bench commands has a range, and its help
// says its default: the flag's own default, or in words when it depends
// on other flags.
func TestBenchNumericFlagsHaveRangeAndDefault(t *testing.T) {
	numeric := map[string]bool{"int": true, "int64": true, "float64": true, "duration": true, "intSlice": true}
	n := 0
	for _, cmd := range benchCmd.Commands() {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !numeric[f.Value.Type()] {
				return
			}
			n++
			r, ok := benchFlagRanges[f.Name]
			if !ok {
				t.Errorf("%s --%s has no range", cmd.Name(), f.Name)
				return
			}
			if zeroDefault(f) {
				if !strings.Contains(f.Usage, "default") && !strings.Contains(f.Usage, "none") {
					t.Errorf("%s --%s: its help does not say its default: %q", cmd.Name(), f.Name, f.Usage)
				}
				return
			}
			for _, v := range strings.Split(strings.Trim(f.DefValue, "[]"), ",") {
				if err := r.check(f, v); err != nil {
					t.Errorf("%s --%s: the default is refused: %v", cmd.Name(), f.Name, err)
				}
			}
		})
	}
	if n < 25 {
		t.Errorf("only %d numeric flags found", n)
	}
}

// Values at the edge of a range are taken as given: no warm-up, no rate
// limit, no capacity lines.
func TestBenchAcceptsEdgeValues(t *testing.T) {
	out, err := runCLI(t, "bench", "crypto", "-q", "--json", "--only", "sha-256", "--sizes", "16", "--duration", "2ms", "--warmup", "0", "--retries", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var crypto bench.CryptoReport
	if err := json.Unmarshal([]byte(out), &crypto); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if crypto.WarmupSeconds != 0 || len(crypto.Results) == 0 {
		t.Errorf("--warmup 0: warm-up %gs, %d results", crypto.WarmupSeconds, len(crypto.Results))
	}
	// Not given, the warm-up is a fifth of the duration.
	out, err = runCLI(t, "bench", "crypto", "-q", "--json", "--only", "sha-256", "--sizes", "16", "--duration", "2ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &crypto); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if crypto.WarmupSeconds != 0.0004 {
		t.Errorf("default warm-up %gs with --duration 2ms, want 0.0004s", crypto.WarmupSeconds)
	}

	addr, _, _ := tlcpServer(t, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	})
	out, err = runCLI(t, "bench", "handshake", "-q", "--json", "--target", addr, "--suite", "ECC_SM4_GCM_SM3", "-c", "2", "-d", "300ms",
		"--warmup", "0", "--rate", "0", "--peak", "0", "--server-cores", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var hs bench.HandshakeReport
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if hs.Load.WarmupSeconds != 0 || hs.Load.Rate != 0 || len(hs.Capacity) != 0 || len(hs.Results) != 1 || hs.Results[0].Handshakes == 0 {
		t.Errorf("--warmup 0 --rate 0 --peak 0: load %+v, capacity %+v, results %+v", hs.Load, hs.Capacity, hs.Results)
	}

	gatewayBenchSetup(t)
	r := runGatewayBench[bench.ProxyReport](t, "bench", "proxy", "--rounds", "1", "-d", "300ms", "--warmup", "0", "--clients", "1", "--protocols", "tls")
	if r.WarmupSeconds != 0 || r.DurationSeconds != 0.3 || len(r.Results) != 2 {
		t.Fatalf("--warmup 0: warm-up %gs, duration %gs, results %+v", r.WarmupSeconds, r.DurationSeconds, r.Results)
	}
	for _, res := range r.Results {
		if res.RequestsPerSecond.Median <= 0 {
			t.Errorf("%+v", res)
		}
	}
}

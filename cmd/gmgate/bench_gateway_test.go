package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/gmgate/gmgate/internal/testexec"
)

// gatewayBenchSetup makes this test binary the gmgate of the gateway
// benchmarks (gateways and upstream alike) and returns a "baseline"
// executable that runs it too.
func gatewayBenchSetup(t *testing.T) string {
	t.Helper()
	oldSelf, oldPin := selfCommandFunc, pinGatewayLoad
	t.Cleanup(func() { selfCommandFunc, pinGatewayLoad = oldSelf, oldPin })
	selfCommandFunc = func() (bench.GatewayCommand, error) { return gmgateCommand, nil }
	pinGatewayLoad = false
	script := filepath.Join(t.TempDir(), "gmgate-baseline")
	var words []string
	for _, w := range testexec.Argv(os.Args[0]) {
		words = append(words, fmt.Sprintf("%q", w))
	}
	body := fmt.Sprintf("#!/bin/sh\nGMGATE_HELPER_PROCESS=1 exec %s -test.run='^TestHelperProcess$' -- \"$@\"\n", strings.Join(words, " "))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the baseline wrapper")
	}
	return script
}

func runGatewayBench[R any](t *testing.T, args ...string) *R {
	t.Helper()
	out, err := runCLI(t, append(args, "--json", "-q")...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// runCLI mixes stderr in; the report is the JSON object.
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON report:\n%s", out)
	}
	r := new(R)
	if err := json.Unmarshal([]byte(out[i:]), r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// TestBenchProxy runs gmgate bench proxy against a baseline, briefly, and
// checks that every build, protocol and number of clients was measured
// and compared.
func TestBenchProxy(t *testing.T) {
	baseline := gatewayBenchSetup(t)
	r := runGatewayBench[bench.ProxyReport](t, "bench", "proxy", "--baseline", baseline,
		"--rounds", "1", "-d", "800ms", "--warmup", "300ms", "--clients", "1,3", "--protocols", "tlcp-cbc,tls")
	if len(r.Setup.Builds) != 2 || r.Setup.Builds[1].Path != baseline {
		t.Fatalf("builds %+v", r.Setup.Builds)
	}
	seen := map[string]bool{}
	for _, res := range r.Results {
		seen[fmt.Sprintf("%s/%s/%d", res.Build, res.Protocol, res.Clients)] = true
		if res.RequestsPerSecond.Median <= 0 || res.Errors != 0 || len(res.Rounds) != 1 || res.P50Ms.Median <= 0 {
			t.Errorf("%+v", res)
		}
	}
	for _, clients := range []int{1, 3} {
		for _, want := range []string{"direct/direct", "this build/TLCP ECC_SM4_CBC_SM3", "baseline/TLCP ECC_SM4_CBC_SM3", "this build/TLS", "baseline/TLS"} {
			if !seen[fmt.Sprintf("%s/%d", want, clients)] {
				t.Errorf("no result for %s with %d clients: %v", want, clients, seen)
			}
		}
	}
	if len(r.Comparisons) != 4 {
		t.Fatalf("%d comparisons, want 4", len(r.Comparisons))
	}
	for _, c := range r.Comparisons {
		if c.Build != "this build" || c.Against != "baseline" || c.RequestsPerSecond.Median <= 0 {
			t.Errorf("%+v", c)
		}
	}
	// The table names what it measured.
	var out strings.Builder
	if err := bench.WriteGatewayReport(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server CPU ms per 1000 requests", "added p99 ms", `"this build" against "baseline"`, baseline} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchDownload(t *testing.T) {
	baseline := gatewayBenchSetup(t)
	r := runGatewayBench[bench.DownloadReport](t, "bench", "download", "--baseline", baseline, "--rounds", "2", "--size-mib", "4")
	if r.Protocol != "TLCP ECC_SM4_CBC_SM3" || r.Size != 4<<20 || len(r.Results) != 2 {
		t.Fatalf("%+v", r)
	}
	for _, res := range r.Results {
		if len(res.Rounds) != 2 || res.MBPerSecond.Median <= 0 || res.Ratio.Median <= 0 {
			t.Errorf("%+v", res)
		}
	}
}

func TestBenchIdleConns(t *testing.T) {
	baseline := gatewayBenchSetup(t)
	r := runGatewayBench[bench.IdleReport](t, "bench", "idle-conns", "--baseline", baseline, "--rounds", "1", "--conns", "40", "--settle", "200ms")
	if r.Conns != 40 || len(r.Results) != 2 {
		t.Fatalf("%+v", r)
	}
	for _, res := range r.Results {
		if len(res.Rounds) != 1 || res.RSSBeforeMiB.Median <= 0 || res.RSSAfterMiB.Median <= 0 {
			t.Errorf("%+v", res)
		}
	}
}

func TestBenchGatewayRefusesBadInput(t *testing.T) {
	gatewayBenchSetup(t)
	for _, args := range [][]string{
		{"bench", "proxy", "--protocols", "quic", "-q"},
		{"bench", "proxy", "--clients", "0", "-q"},
		{"bench", "download", "--protocol", "http3", "-q"},
		{"bench", "proxy", "--baseline", "/nonexistent/gmgate", "-q"},
	} {
		if out, err := runCLI(t, args...); err == nil {
			t.Errorf("%s: no error\n%s", strings.Join(args, " "), out)
		}
	}
}

package bench

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testexec"
)

func TestSummarizeRounds(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Summary
		text string
	}{
		{[]float64{3, 1, 2}, Summary{2, 1, 3}, "2.00 (1.00-3.00)"},
		{[]float64{4, 1, 2, 3}, Summary{2.5, 1, 4}, "2.50 (1.00-4.00)"},
		{[]float64{-1.5, 0.25}, Summary{-0.625, -1.5, 0.25}, "-0.625 (-1.50 to 0.250)"},
		{[]float64{-16.619, 4}, Summary{-6.3095, -16.619, 4}, "-6.31 (-16.6 to 4.00)"},
		{nil, Summary{}, "0 (0-0)"},
	} {
		got := summarizeRounds(tc.in)
		if got != tc.want || got.String() != tc.text {
			t.Errorf("summarizeRounds(%v) = %+v %q, want %+v %q", tc.in, got, got.String(), tc.want, tc.text)
		}
	}
}

func TestBuildOrderAlternates(t *testing.T) {
	bs := []GatewayBuild{{Name: "a"}, {Name: "b"}}
	if o := buildOrder(bs, 0); o[0].Name != "a" || o[1].Name != "b" {
		t.Errorf("round 0: %v", o)
	}
	if o := buildOrder(bs, 1); o[0].Name != "b" || o[1].Name != "a" {
		t.Errorf("round 1: %v", o)
	}
	if bs[0].Name != "a" {
		t.Error("buildOrder reordered its argument")
	}
}

// TestProcReaders reads this process's own figures.
func TestProcReaders(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if testexec.Emulated() {
		t.Skip("under the emulator this process's /proc/PID/stat is the emulator's, with no CPU times (TestProcessTreeCPUOfAShell reads other processes')")
	}
	// Burn a little CPU so that the tick counters move.
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i ^ x
	}
	_ = x
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("procCPU: %v, %v", cpu, err)
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("procRSS: %d, %v", rss, err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU of no process: no error")
	}
}

// TestGatewayReportsRoundTrip: a report written with --json reads back
// (gmgate bench report) and shows as its table.
func TestGatewayReportsRoundTrip(t *testing.T) {
	s := Summary{Median: 2, Min: 1, Max: 3}
	for _, rep := range []any{
		&ProxyReport{GatewayReportHead: GatewayReportHead{Schema: ProxySchema}, Results: []ProxyResult{{Build: "direct", Protocol: "direct", Clients: 8, RequestsPerSecond: s}, {Build: "this build", Protocol: "TLS", Clients: 8, RequestsPerSecond: s, ServerCPUPer1000: s}}},
		&DownloadReport{GatewayReportHead: GatewayReportHead{Schema: DownloadSchema}, Size: 1 << 20, Results: []DownloadResult{{Build: "this build", MBPerSecond: s}}},
		&IdleReport{GatewayReportHead: GatewayReportHead{Schema: IdleSchema}, Conns: 10, Results: []IdleResult{{Build: "this build", KiBPerConn: s}}},
	} {
		var js bytes.Buffer
		if err := WriteJSON(&js, rep); err != nil {
			t.Fatal(err)
		}
		back, err := ReadReport(&js)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.TypeOf(back) != reflect.TypeOf(rep) {
			t.Fatalf("read back %T, wrote %T", back, rep)
		}
		var table bytes.Buffer
		if err := (Output{}).Write(&table, back); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(table.String(), "this build") || !strings.Contains(table.String(), "2.00 (1.00-3.00)") {
			t.Errorf("%T table:\n%s", rep, table.String())
		}
		// Every kind of report charts (gmgate bench report --chart).
		checkCharts(t, back)
	}
}

// A negative option is refused, never taken for the default; zero is the
// default, but for a warm-up and a settling time, which it leaves out.
func TestGatewayOptionsNegativeRefusedZeroDefault(t *testing.T) {
	g := GatewayOptions{Builds: []GatewayBuild{{Name: "b"}}, Upstream: BinaryCommand("/bin/true")}
	for name, err := range map[string]error{
		"proxy duration": (&ProxyOptions{GatewayOptions: g, Duration: -1}).defaults(),
		"proxy warm-up":  (&ProxyOptions{GatewayOptions: g, Warmup: -1}).defaults(),
		"proxy body":     (&ProxyOptions{GatewayOptions: g, Body: -1}).defaults(),
		"download size":  (&DownloadOptions{GatewayOptions: g, Size: -1}).defaults(),
		"idle conns":     (&IdleOptions{GatewayOptions: g, Conns: -1}).defaults(),
		"idle settle":    (&IdleOptions{GatewayOptions: g, Settle: -1}).defaults(),
		"rounds":         (&GatewayOptions{Builds: g.Builds, Upstream: g.Upstream, Rounds: -1}).defaults(),
		"gateway cores":  (&GatewayOptions{Builds: g.Builds, Upstream: g.Upstream, ServerCores: -1}).defaults(),
	} {
		if err == nil {
			t.Errorf("%s: a negative value was taken", name)
		}
	}
	p := ProxyOptions{GatewayOptions: g}
	if err := p.defaults(); err != nil || p.Duration != DefaultProxyDuration || p.Warmup != 0 || p.Body != DefaultBody || !reflect.DeepEqual(p.Clients, DefaultClients) {
		t.Errorf("zero proxy options: %v %+v", err, p)
	}
	i := IdleOptions{GatewayOptions: g}
	if err := i.defaults(); err != nil || i.Conns != DefaultIdleConns || i.Settle != 0 || i.Rounds != 3 {
		t.Errorf("zero idle options: %v %+v", err, i)
	}
}

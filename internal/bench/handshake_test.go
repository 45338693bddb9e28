package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testnet"
)

// quickOptions keeps test runs short; figures are checked for shape and
// consistency, never for speed.
func quickOptions(t *testing.T, suites string) HandshakeOptions {
	t.Helper()
	sc, err := ParseScenarios(suites, 0)
	if err != nil {
		t.Fatal(err)
	}
	return HandshakeOptions{
		Scenarios:   sc,
		Concurrency: 4,
		// Long enough that a loaded machine running the race detector
		// still completes handshakes in every window.
		Duration: 600 * time.Millisecond,
		Warmup:   200 * time.Millisecond,
		Timeout:  5 * time.Second,
		Peak:     1000,
		Launcher: testLauncher,
	}
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// checkConsistent checks what every scenario result must satisfy.
func checkConsistent(t *testing.T, res ScenarioResult, concurrency int) {
	t.Helper()
	if res.Handshakes <= 0 || res.Rounds < 1 {
		t.Fatalf("%s: no handshakes counted in %d rounds (errors %v)", res.Name, res.Rounds, res.Errors)
	}
	if res.FullHandshakes+res.Resumed != res.Handshakes {
		t.Errorf("%s: full %d + resumed %d != handshakes %d", res.Name, res.FullHandshakes, res.Resumed, res.Handshakes)
	}
	if res.Latency.Count != res.Handshakes {
		t.Errorf("%s: %d latency samples for %d handshakes", res.Name, res.Latency.Count, res.Handshakes)
	}
	if res.WindowSeconds <= 0 || !near(res.HandshakesPerSec, float64(res.Handshakes)/res.WindowSeconds) {
		t.Errorf("%s: %g handshakes/s is not %d handshakes over %gs", res.Name, res.HandshakesPerSec, res.Handshakes, res.WindowSeconds)
	}
	l := res.Latency
	if !(l.P50Ms > 0 && l.P50Ms <= l.P95Ms && l.P95Ms <= l.P99Ms && l.P99Ms <= l.MaxMs && l.MeanMs <= l.MaxMs) {
		t.Errorf("%s: latency percentiles out of order: %+v", res.Name, l)
	}
	var sum int64
	for _, n := range res.Errors {
		sum += n
	}
	if sum != res.ErrorCount {
		t.Errorf("%s: errors by kind add up to %d, error count is %d", res.Name, sum, res.ErrorCount)
	}
	if res.ServerCPUSeconds > 0 && !near(res.HandshakesPerServerCPUSecond, float64(res.Handshakes)/res.ServerCPUSeconds) {
		t.Errorf("%s: %g per server CPU-second is not %d handshakes over %gs of CPU", res.Name, res.HandshakesPerServerCPUSecond, res.Handshakes, res.ServerCPUSeconds)
	}
	if res.ServerHandshakes >= 0 {
		// The server's window and the client's differ by the handshakes
		// in flight at either edge.
		if d := res.ServerHandshakes - res.Handshakes; d > int64(2*concurrency) || d < -int64(2*concurrency) {
			t.Errorf("%s: server counted %d handshakes, client %d", res.Name, res.ServerHandshakes, res.Handshakes)
		}
	}
}

func TestHandshakeSelfStarted(t *testing.T) {
	opts := quickOptions(t, "ECC_SM4_GCM_SM3,ECDHE_SM4_CBC_SM3,ECC_SM4_GCM_SM3+resumed,TLS1.3,TLS1.2")
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(opts.Scenarios) {
		t.Fatalf("%d results for %d scenarios", len(rep.Results), len(opts.Scenarios))
	}
	for _, res := range rep.Results {
		checkConsistent(t, res, opts.Concurrency)
		if res.ErrorCount != 0 {
			t.Errorf("%s: errors against a healthy server: %v", res.Name, res.Errors)
		}
		if res.ServerCPUSeconds <= 0 || res.HandshakesPerServerCPUSecond <= 0 {
			t.Errorf("%s: no server CPU figure: %+v", res.Name, res)
		}
		switch {
		case res.ResumeRatio == 1 && res.Resumed == 0:
			t.Errorf("%s: nothing resumed", res.Name)
		case res.ResumeRatio == 0 && res.Resumed != 0:
			t.Errorf("%s: %d resumed without asking", res.Name, res.Resumed)
		}
	}
	if rep.Server.Mode != "child" || len(rep.Server.CPUs) != 1 || rep.Server.GOMAXPROCS != 1 || rep.Server.KeyBackend != "software/software" {
		t.Errorf("server info: %+v", rep.Server)
	}
	c := rep.Comparison
	if c == nil || c.Numerator != "ECC_SM4_GCM_SM3" || !strings.HasPrefix(c.Denominator, "TLS1.2") ||
		!near(c.Ratio, rep.Results[0].HandshakesPerServerCPUSecond/rep.Results[4].HandshakesPerServerCPUSecond) {
		t.Errorf("comparison: %+v", c)
	}
	if len(rep.Capacity) != len(rep.Results) {
		t.Fatalf("%d capacity lines", len(rep.Capacity))
	}
	for i, cp := range rep.Capacity {
		if cp.Scenario != rep.Results[i].Name || !near(cp.Cores, 1000/rep.Results[i].HandshakesPerServerCPUSecond) {
			t.Errorf("capacity %+v for %+v", cp, rep.Results[i])
		}
	}

	checkHandshakeJSON(t, rep)

	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	// Rows are named after what was negotiated with the self-started
	// server's ECDSA P-256 certificate.
	for i, want := range []struct{ name, requested string }{
		{"ECC_SM4_GCM_SM3", "ECC_SM4_GCM_SM3"}, {"ECDHE_SM4_CBC_SM3", "ECDHE_SM4_CBC_SM3"}, {"ECC_SM4_GCM_SM3 resumed", "ECC_SM4_GCM_SM3 resumed"},
		{"TLS1.3 X25519 ECDSA-P256", "TLS1.3 X25519"}, {"TLS1.2 P-256 ECDSA-P256", "TLS1.2 P-256"},
	} {
		r := rep.Results[i]
		label := strings.TrimSuffix(want.name, " resumed")
		if r.Name != want.name || r.Requested != want.requested || r.Negotiated[label] != r.FullHandshakes || r.Negotiated[label+" (resumed)"] != r.Resumed {
			t.Errorf("result %d: name %q, requested %q, negotiated %v (%d full, %d resumed)", i, r.Name, r.Requested, r.Negotiated, r.FullHandshakes, r.Resumed)
		}
	}
	for _, want := range []string{"ECC_SM4_GCM_SM3 resumed", "TLS1.2 P-256 ECDSA-P256", "per server CPU-s", "full handshakes per server CPU-second", "Capacity"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	checkCharts(t, rep)
}

// checkHandshakeJSON checks the JSON layout a machine reading --json
// relies on.
func checkHandshakeJSON(t *testing.T, rep *HandshakeReport) {
	t.Helper()
	doc, raw := decodeReport(t, rep, HandshakeSchema, "started", "machine", "server", "load", "results", "capacity", "load_average")
	results, _ := doc["results"].([]any)
	if len(results) == 0 {
		t.Fatal("no results in JSON")
	}
	numbers := []string{"resume_ratio", "window_seconds", "handshakes", "full_handshakes", "resumed", "handshakes_per_sec",
		"requests", "error_count", "server_cpu_seconds", "server_busy", "handshakes_per_server_cpu_second", "server_handshakes",
		"load_cpu_seconds", "load_busy"}
	for _, r := range results {
		m := r.(map[string]any)
		for _, k := range []string{"name", "protocol", "suite"} {
			if s, ok := m[k].(string); !ok || s == "" {
				t.Errorf("result %v: %q is not a non-empty string", m["name"], k)
			}
		}
		for _, k := range numbers {
			if _, ok := m[k].(float64); !ok {
				t.Errorf("result %v: %q is not a number", m["name"], k)
			}
		}
		lat, ok := m["latency"].(map[string]any)
		if !ok {
			t.Fatalf("result %v: no latency object", m["name"])
		}
		for _, k := range []string{"count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"} {
			if v, ok := lat[k].(float64); !ok || v <= 0 {
				t.Errorf("result %v: latency %q = %v", m["name"], k, lat[k])
			}
		}
		if _, ok := m["errors"].(map[string]any); !ok {
			t.Errorf("result %v: errors is not an object", m["name"])
		}
	}
	// The JSON reads back into the same report.
	var back HandshakeReport
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Results[0].Handshakes != rep.Results[0].Handshakes || back.Results[0].Latency != rep.Results[0].Latency {
		t.Errorf("JSON round trip changed the figures")
	}
}

// decodeReport writes a report as --json does, checks its schema name and
// top-level keys, and returns it decoded and raw.
func decodeReport(t *testing.T, report any, schema string, keys ...string) (map[string]any, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := (Output{JSON: true}).Write(&buf, report); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != schema {
		t.Errorf("schema %v, want %s", doc["schema"], schema)
	}
	for _, k := range keys {
		if _, ok := doc[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	// gmgate bench report reads it back as the same kind of report, and
	// shows the same table.
	back, err := ReadReport(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var want, got bytes.Buffer
	if err := (Output{}).Write(&want, report); err != nil {
		t.Fatal(err)
	}
	if err := (Output{}).Write(&got, back); err != nil {
		t.Fatal(err)
	}
	if want.String() != got.String() {
		t.Errorf("the report read back shows\n%s\ninstead of\n%s", got.String(), want.String())
	}
	return doc, buf.Bytes()
}

func TestReadReportErrors(t *testing.T) {
	for _, in := range []string{"", "[]", `{"schema":"other/v1"}`, `{"schema":"` + HandshakeSchema + `","results":"no"}`} {
		if _, err := ReadReport(strings.NewReader(in)); err == nil {
			t.Errorf("%q read as a report", in)
		}
	}
}

func checkCharts(t *testing.T, report any) {
	t.Helper()
	dir := t.TempDir()
	svgFile, htmlFile := filepath.Join(dir, "c.svg"), filepath.Join(dir, "c.html")
	for _, f := range []string{svgFile, htmlFile} {
		if err := WriteChartFile(f, report); err != nil {
			t.Fatal(err)
		}
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
	}
	if !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("<rect")) {
		t.Errorf("chart has no drawing")
	}
	page, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("<!DOCTYPE html>")) || !bytes.Contains(page, []byte("<svg")) || !bytes.Contains(page, []byte("<pre>")) {
		t.Errorf("HTML chart lacks the drawing or the table")
	}
	if bytes.Contains(page, []byte("http://")) && !bytes.Contains(page, []byte("http://www.w3.org/2000/svg")) {
		t.Errorf("HTML chart refers to outside resources")
	}
}

func TestHandshakeHTTPWorkload(t *testing.T) {
	opts := quickOptions(t, "ECC_SM4_GCM_SM3")
	opts.HTTPPath = "/bench"
	opts.HTTPBody = 20000
	opts.ServerProfileDir = filepath.Join(t.TempDir(), "profiles")
	opts.PinLoadGenerator = true
	cpusBefore, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	procsBefore := runtime.GOMAXPROCS(0)
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cpusAfter, _ := allowedCPUs(); !slices.Equal(cpusAfter, cpusBefore) || runtime.GOMAXPROCS(0) != procsBefore {
		t.Errorf("CPUs %v and GOMAXPROCS %d after the run, %v and %d before", cpusAfter, runtime.GOMAXPROCS(0), cpusBefore, procsBefore)
	}
	if runtime.GOOS == "linux" && len(cpusBefore) > 1 && len(rep.Load.CPUs) != len(cpusBefore)-1 {
		t.Errorf("load generator on CPUs %v of %v", rep.Load.CPUs, cpusBefore)
	}
	prof, err := os.ReadFile(filepath.Join(opts.ServerProfileDir, "ECC_SM4_GCM_SM3.cpu.pprof"))
	if err != nil || !bytes.HasPrefix(prof, []byte{0x1f, 0x8b}) {
		t.Errorf("no gzipped CPU profile of the server (%v)", err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, opts.Concurrency)
	if res.ErrorCount != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	if res.RequestLatency == nil || res.Requests != res.Handshakes || res.RequestLatency.Count != res.Requests {
		t.Fatalf("requests %d, handshakes %d, request latency %+v", res.Requests, res.Handshakes, res.RequestLatency)
	}
	// Each request's time includes its handshake, so every order
	// statistic is at least the handshake's.
	if q := res.RequestLatency; q.P50Ms < res.Latency.P50Ms || q.P99Ms < res.Latency.P99Ms || q.MaxMs < res.Latency.MaxMs {
		t.Errorf("request latency %+v below handshake latency %+v", *q, res.Latency)
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	if !strings.Contains(table.String(), "requests/s") {
		t.Errorf("table lacks the request figures:\n%s", table.String())
	}
}

func TestHandshakeRateLimit(t *testing.T) {
	opts := quickOptions(t, "ECC_SM4_GCM_SM3+resumed")
	opts.Rate = 40
	opts.Duration = 500 * time.Millisecond
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, opts.Concurrency)
	// Starts are spaced 25ms apart; the window can hold at most
	// window/25ms + 1 of them, plus those started before it.
	if limit := int64(res.WindowSeconds*opts.Rate) + 1 + int64(opts.Concurrency); res.Handshakes > limit {
		t.Errorf("%d handshakes in %.3fs at a rate of %g/s", res.Handshakes, res.WindowSeconds, opts.Rate)
	}
}

// startTestServer runs the benchmark server in this process, as a remote
// target.
func startTestServer(t *testing.T, protocol string) *childServer {
	t.Helper()
	ids, err := makeIdentities(t.TempDir(), ServerIdentity{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := startChildServer(context.Background(), childConfig{
		Protocol: protocol, SignCert: ids.tlcp.SignCert, SignKey: ids.tlcp.SignKey, EncCert: ids.tlcp.EncCert, EncKey: ids.tlcp.EncKey,
		TLSCert: ids.tlsCert, TLSKey: ids.tlsKey, HTTPBody: 10, HandshakeTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

func TestHandshakeRemoteWithMetrics(t *testing.T) {
	srv := startTestServer(t, "tlcp")
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := srv.stats()
		fmt.Fprintf(w, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", st.cpu().Seconds())
	}))
	defer metrics.Close()

	opts := quickOptions(t, "ECC_SM4_GCM_SM3,ECDHE_SM4_GCM_SM3")
	opts.Launcher = nil
	opts.Target = srv.ln.Addr().String()
	opts.MetricsURL = metrics.URL + "/metrics"
	opts.Rounds = 2
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Server.Mode != "remote" || rep.Server.CPUSource != opts.MetricsURL {
		t.Errorf("server info %+v", rep.Server)
	}
	for _, res := range rep.Results {
		checkConsistent(t, res, opts.Concurrency)
		if res.ServerCPUSeconds <= 0 || res.ServerHandshakes != -1 || res.ErrorCount != 0 {
			t.Errorf("%s: %+v", res.Name, res)
		}
		if rs := res.RoundHandshakesPerServerCPUSecond; res.Rounds != 2 || len(rs) != 2 || rs[0] <= 0 || rs[1] <= 0 ||
			res.HandshakesPerServerCPUSecond < min(rs[0], rs[1])*(1-1e-9) || res.HandshakesPerServerCPUSecond > max(rs[0], rs[1])*(1+1e-9) {
			t.Errorf("%s: %d rounds %v, together %g", res.Name, res.Rounds, rs, res.HandshakesPerServerCPUSecond)
		}
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	if !strings.Contains(table.String(), "2 rounds") || !strings.Contains(table.String(), "per round") {
		t.Errorf("table does not show the rounds:\n%s", table.String())
	}
}

func TestHandshakeRemoteWithoutMetrics(t *testing.T) {
	srv := startTestServer(t, "tls")
	opts := quickOptions(t, "TLS1.3")
	opts.Target = srv.ln.Addr().String()
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, opts.Concurrency)
	if res.ServerCPUSeconds != 0 || res.HandshakesPerServerCPUSecond != 0 || len(rep.Capacity) != 0 {
		t.Errorf("CPU figures without a CPU source: %+v", res)
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	if !strings.Contains(table.String(), "unknown without the server's CPU time") {
		t.Errorf("table does not say why there is no capacity line:\n%s", table.String())
	}
}

func TestHandshakeBadTargets(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	// How an abrupt close shows depends on when the client's ClientHello
	// meets it: before the connect completes, on the write, or on the read.
	abrupt := []string{"handshake: closed by server", "handshake: connection reset", "handshake: broken pipe", "connect: connection reset"}
	cases := []struct {
		name   string
		target string
		kinds  []string
	}{
		// Linux now and then drops a SYN to a closed port rather than
		// answering with a reset.
		{"refused", refused, []string{"connect: connection refused", "connect: timeout"}},
		{"closes at once", testnet.Serve(t, func(net.Conn) {}), abrupt},
		{"resets", testnet.Serve(t, func(c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0)
		}), abrupt},
		{"speaks nonsense", testnet.Serve(t, func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			_, _ = io.Copy(io.Discard, c)
		}), nil},
		{"never answers", testnet.Serve(t, func(c net.Conn) {
			_, _ = io.Copy(io.Discard, c)
		}), []string{"handshake: timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := quickOptions(t, "ECC_SM4_GCM_SM3,TLS1.3")
			opts.Target = tc.target
			// Only the silent server needs a short timeout; the others
			// fail on their own, and a loaded machine may take longer
			// than that to deliver a reset.
			opts.Timeout = 3 * time.Second
			if tc.name == "never answers" {
				opts.Timeout = 150 * time.Millisecond
			}
			// A run that would take a minute stops once the first second
			// has shown that every connection fails.
			opts.Duration = 30 * time.Second
			start := time.Now()
			rep, err := RunHandshake(context.Background(), opts)
			if !errors.Is(err, ErrNoHandshake) || rep == nil || !strings.Contains(err.Error(), "ECC_SM4_GCM_SM3, TLS1.3 X25519") {
				t.Fatalf("got %v, want ErrNoHandshake naming both scenarios, with the report", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("a dead target took %s", d)
			}
			res := rep.Results[0]
			if res.Handshakes != 0 || res.ErrorCount == 0 || res.Latency.Count != 0 || !res.StoppedEarly || !rep.Results[1].StoppedEarly {
				t.Fatalf("handshakes %d, errors %v, stopped early %v", res.Handshakes, res.Errors, res.StoppedEarly)
			}
			for kind := range res.Errors {
				if tc.kinds != nil && !contains(tc.kinds, kind) {
					t.Errorf("error kind %q, want one of %q", kind, tc.kinds)
				}
			}
			var table bytes.Buffer
			WriteHandshakeTable(&table, rep)
			if !strings.Contains(table.String(), "Errors by kind") || !strings.Contains(table.String(), "every connection failed") {
				t.Errorf("table does not list the errors:\n%s", table.String())
			}
			// No handshake, no latency: "-", not 0.
			if !regexp.MustCompile(`(?m)^ECC_SM4_GCM_SM3\s+0\s+-\s+-\s+-\s+-\s`).MatchString(table.String()) {
				t.Errorf("the failed row shows latencies:\n%s", table.String())
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestHandshakeCancel(t *testing.T) {
	addr := testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	opts := quickOptions(t, "TLS1.2")
	opts.Target = addr
	opts.Duration = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := RunHandshake(ctx, opts); err == nil {
		t.Fatal("a cancelled run reported success")
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancelling took %s", time.Since(start))
	}
}

func TestHandshakeOptionErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*HandshakeOptions)
		want string
	}{
		{"bad target", func(o *HandshakeOptions) { o.Target = "nohostport" }, "host:port"},
		{"metrics without target", func(o *HandshakeOptions) { o.MetricsURL = "http://127.0.0.1:1/metrics" }, "remote target"},
		{"partial identity", func(o *HandshakeOptions) { o.Identity.SignKey = "/k.pem" }, "all four"},
		{"identity with target", func(o *HandshakeOptions) {
			o.Target = "127.0.0.1:1"
			o.Identity = ServerIdentity{"a", "b", "c", "d"}
		}, "self-started"},
		{"negative rate", func(o *HandshakeOptions) { o.Rate = -1 }, "rate"},
		{"negative duration", func(o *HandshakeOptions) { o.Duration = -time.Second }, "negative"},
		{"negative concurrency", func(o *HandshakeOptions) { o.Concurrency = -1 }, "negative"},
		{"peak not a number", func(o *HandshakeOptions) { o.Peak = math.NaN() }, "peak"},
		{"profile of a target", func(o *HandshakeOptions) {
			o.Target = "127.0.0.1:1"
			o.ServerProfileDir = t.TempDir()
		}, "self-started"},
		{"relative path", func(o *HandshakeOptions) { o.HTTPPath = "x" }, "must start with /"},
		{"too many cores", func(o *HandshakeOptions) { o.ServerCores = 4096 }, "cannot have"},
		{"missing CA file", func(o *HandshakeOptions) { o.CAFile = filepath.Join(t.TempDir(), "none.pem") }, "CA certificates"},
		{"damaged CA file", func(o *HandshakeOptions) { o.CAFile = damagedCAFile(t) }, "PEM block 2 (line 12) is damaged"},
		{"empty CA file", func(o *HandshakeOptions) {
			o.CAFile = filepath.Join(t.TempDir(), "empty.pem")
			if err := os.WriteFile(o.CAFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "empty.pem"},
		{"metrics unreachable", func(o *HandshakeOptions) {
			o.Target = "127.0.0.1:1"
			o.MetricsURL = "http://127.0.0.1:1/metrics"
		}, "metrics"},
		{"server cannot start", func(o *HandshakeOptions) {
			o.Identity = ServerIdentity{"/nonexistent.crt", "/nonexistent.key", "/nonexistent.crt", "/nonexistent.key"}
		}, "server process"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := quickOptions(t, "ECC_SM4_GCM_SM3")
			tc.edit(&opts)
			_, err := RunHandshake(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseScenarios(t *testing.T) {
	s, err := ParseScenarios(DefaultComparison, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, proto string
		ratio       float64
	}{
		{"ECC_SM4_GCM_SM3", ProtoTLCP, 0},
		{"ECDHE_SM4_GCM_SM3", ProtoTLCP, 0},
		{"ECC_SM4_GCM_SM3 resumed", ProtoTLCP, 1},
		{"TLS1.3-SM curveSM2", ProtoTLS13SM, 0},
		{"TLS1.3-SM curveSM2 resumed", ProtoTLS13SM, 1},
		{"TLS1.3 X25519", ProtoTLS13, 0},
		{"TLS1.2 P-256", ProtoTLS12, 0},
	}
	if len(s) != len(want) {
		t.Fatalf("%d scenarios", len(s))
	}
	for i, w := range want {
		if s[i].Name != w.name || s[i].Protocol != w.proto || s[i].ResumeRatio != w.ratio {
			t.Errorf("scenario %d: %+v, want %+v", i, s[i], w)
		}
	}
	if !s[1].needsClientCert() || s[0].needsClientCert() || s[4].needsClientCert() {
		t.Error("only the ECDHE suites need the client certificate")
	}
	s, err = ParseScenarios("ecc-sm2-sm4-gcm-sm3, tls13-mlkem", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if s[0].Suite != "ECC_SM4_GCM_SM3" || s[0].ResumeRatio != 0.5 || s[0].Name != "ECC_SM4_GCM_SM3 50% resumed" || s[1].Protocol != ProtoTLS13 {
		t.Errorf("parsed %+v", s)
	}
	s, err = ParseScenarios("TLS1.2,tls1.2-x25519", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s[0].curves[0] != tls.CurveP256 || s[1].curves[0] != tls.X25519 || s[1].Protocol != ProtoTLS12 || s[1].Name != "TLS1.2 X25519" || len(s[0].tlsSuites) != 2 {
		t.Errorf("TLS 1.2 scenarios: %+v", s)
	}
	for _, bad := range []string{"", "RSA_WITH_RC4", "ECC_SM4_GCM_SM3+twice"} {
		if _, err := ParseScenarios(bad, 0); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParseScenarios("TLS1.2", 1.5); err == nil {
		t.Error("a ratio above 1 parsed")
	}
}

func TestResumeTurn(t *testing.T) {
	for _, ratio := range []float64{0, 0.1, 0.25, 0.5, 0.8, 1} {
		n := 0
		for i := range int64(1000) {
			if resumeTurn(i, ratio) {
				n++
			}
		}
		if want := int(ratio * 1000); n != want {
			t.Errorf("ratio %g: %d of 1000 resume, want %d", ratio, n, want)
		}
	}
}

func TestParseCPUMetric(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n", 12.5, true},
		{"process_cpu_seconds_totalx 3\nprocess_cpu_seconds_total{job=\"gw\"} 7e-1 1700000000\n", 0.7, true},
		{"go_goroutines 10\n", 0, false},
		{"process_cpu_seconds_total abc\n", 0, false},
	}
	for _, tc := range cases {
		got, err := parseCPUMetric(strings.NewReader(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %v, %v", tc.in, got, err)
		}
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.Count != 100 || s.P50Ms != 50 || s.P95Ms != 95 || s.P99Ms != 99 || s.MaxMs != 100 || s.MeanMs != 50.5 {
		t.Errorf("%+v", s)
	}
	if one := summarize([]time.Duration{3 * time.Millisecond}); one.P50Ms != 3 || one.P99Ms != 3 || one.MaxMs != 3 {
		t.Errorf("%+v", one)
	}
	if empty := summarize(nil); empty != (LatencyStats{}) {
		t.Errorf("%+v", empty)
	}
}

// damagedCAFile writes a CA certificate followed by a copy cut short (a
// CA pasted without its last lines) and returns the file.
func damagedCAFile(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Root.Raw})
	file := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(file, append(good, good[:len(good)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestHandshakeBaseline(t *testing.T) {
	opts := quickOptions(t, "ECC_SM4_GCM_SM3")
	var mine, base []string
	launch := func(into *[]string) Launcher {
		return func(cfg string) (*exec.Cmd, error) {
			*into = append(*into, cfg)
			return testLauncher(cfg)
		}
	}
	opts.Launcher, opts.Baseline, opts.BaselinePath = launch(&mine), launch(&base), "/opt/old/gmgate"
	opts.Rounds = 2
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 2 || len(base) != 2 {
		t.Fatalf("started %d servers of this build and %d of the baseline, want 2 each", len(mine), len(base))
	}
	b := rep.Baseline
	if b == nil || b.Path != opts.BaselinePath || len(b.Results) != 1 || len(b.Ratios) != 1 || len(rep.Results) != 1 {
		t.Fatalf("baseline comparison %+v", b)
	}
	checkConsistent(t, b.Results[0], opts.Concurrency)
	ra, my, old := b.Ratios[0], rep.Results[0].RoundHandshakesPerServerCPUSecond, b.Results[0].RoundHandshakesPerServerCPUSecond
	if len(ra.Rounds) != 2 || len(my) != 2 || len(old) != 2 {
		t.Fatalf("ratios %+v of rounds %v over %v", ra, my, old)
	}
	for i := range 2 {
		if !near(ra.Rounds[i], my[i]/old[i]) {
			t.Errorf("round %d: ratio %g, want %g / %g", i, ra.Rounds[i], my[i], old[i])
		}
	}
	if ra.Summary.Min > ra.Summary.Median || ra.Summary.Median > ra.Summary.Max || !near(ra.Summary.Median, (ra.Rounds[0]+ra.Rounds[1])/2) {
		t.Errorf("summary %+v of %v", ra.Summary, ra.Rounds)
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	for _, want := range []string{"Baseline /opt/old/gmgate", "This build / baseline", fmt.Sprintf("%.3f×", ra.Summary.Median)} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	opts.Target = "127.0.0.1:1"
	if _, err := RunHandshake(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("a baseline with a target: %v", err)
	}
}

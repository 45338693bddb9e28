package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// WriteHandshakeTable writes the report as aligned text.
func WriteHandshakeTable(w io.Writer, r *HandshakeReport) {
	m := r.Machine
	fmt.Fprintf(w, "gmgate bench handshake: %s, %d CPUs, %s/%s, %s, gmsm %s\n", m.CPUModel, m.NumCPU, m.GOOS, m.GOARCH, m.GoVersion, m.GMSMVersion)
	writeWarnings(w, m)
	s := r.Server
	switch s.Mode {
	case "child":
		fmt.Fprintf(w, "server: child process on loopback, CPUs %s (GOMAXPROCS %d), TLCP keys %s; its CPU time from getrusage\n", cpuList(s.CPUs), s.GOMAXPROCS, orDash(s.KeyBackend))
	default:
		src := "unknown (give --server-pid PID for a server on this machine, or --metrics URL for gmgate's process_cpu_seconds_total)"
		switch {
		case strings.HasPrefix(s.CPUSource, "/proc/"):
			src = "from " + s.CPUSource + "/stat, the process and its children"
		case s.CPUSource != "":
			src = "process_cpu_seconds_total from " + s.CPUSource
		}
		cores := "its cores unknown (busy share with --server-cores N)"
		if s.Cores > 0 {
			cores = fmt.Sprintf("busy share over %d CPUs", s.Cores)
			if len(s.CPUs) > 0 {
				cores += " (" + cpuList(s.CPUs) + ")"
			}
		}
		fmt.Fprintf(w, "server: %s; its CPU time %s; %s\n", s.Address, src, cores)
	}
	l := r.Load
	var load []string
	load = append(load, fmt.Sprintf("%d connections in flight", l.Concurrency))
	if l.Rate > 0 {
		load = append(load, fmt.Sprintf("at most %s new connections/s", num(l.Rate)))
	}
	load = append(load, "one new TCP connection per handshake")
	if l.HTTPPath != "" {
		load = append(load, "one GET "+l.HTTPPath+" per connection")
	}
	if l.Rounds > 1 {
		load = append(load, fmt.Sprintf("%d rounds of %s measured after %s warm-up each, added up", l.Rounds, seconds(l.DurationSeconds), seconds(l.WarmupSeconds)))
	} else {
		load = append(load, fmt.Sprintf("%s measured after %s warm-up", seconds(l.DurationSeconds), seconds(l.WarmupSeconds)))
	}
	if len(l.CPUs) > 0 {
		load = append(load, fmt.Sprintf("load generator on CPUs %s (%d of %d)", cpuList(l.CPUs), len(l.CPUs), m.NumCPU))
	}
	if !l.VerifiesCertificates {
		load = append(load, "server certificates not verified")
	}
	fmt.Fprintf(w, "load: %s\n", strings.Join(load, "; "))
	fmt.Fprintf(w, "load average %s before, %s after\n\n", loadAvg(r.LoadAverage[0]), loadAvg(r.LoadAverage[1]))

	header := []string{"scenario", "handshakes/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "per server CPU-s", "server busy", "load busy", "resumed", "errors"}
	if l.Rounds > 1 {
		header = append(header, "per round: lowest-highest")
	}
	t := newTable(header...).leftAlign(1)
	for _, res := range r.Results {
		perCPU, busy := "-", "-"
		if res.HandshakesPerServerCPUSecond > 0 {
			perCPU = num(res.HandshakesPerServerCPUSecond)
		}
		if res.ServerBusy > 0 {
			busy = percent(res.ServerBusy)
		}
		resumed := "-"
		if res.Handshakes > 0 {
			resumed = percent(float64(res.Resumed) / float64(res.Handshakes))
		}
		done := res.Handshakes > 0
		row := []string{res.Name, num(res.HandshakesPerSec), ms(res.Latency.P50Ms, done), ms(res.Latency.P95Ms, done), ms(res.Latency.P99Ms, done), ms(res.Latency.MaxMs, done),
			perCPU, busy, percent(res.LoadBusy), resumed, fmt.Sprint(res.ErrorCount)}
		if rs := res.RoundHandshakesPerServerCPUSecond; len(rs) > 1 {
			row = append(row, num(slices.Min(rs))+"-"+num(slices.Max(rs)))
		}
		t.add(row...)
	}
	t.write(w, "")

	if l.HTTPPath != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Requests (connect, handshake, GET and the whole response):")
		t := newTable("scenario", "requests/s", "p50 ms", "p95 ms", "p99 ms", "max ms").leftAlign(1)
		for _, res := range r.Results {
			if res.RequestLatency == nil {
				continue
			}
			q := res.RequestLatency
			done := res.Requests > 0
			t.add(res.Name, num(float64(res.Requests)/res.WindowSeconds), ms(q.P50Ms, done), ms(q.P95Ms, done), ms(q.P99Ms, done), ms(q.MaxMs, done))
		}
		t.write(w, "  ")
	}

	if b := r.Baseline; b != nil {
		fmt.Fprintf(w, "\nBaseline %s, the same rounds (each scenario against both builds in turn):\n", b.Path)
		t := newTable("scenario", "handshakes/s", "p50 ms", "p99 ms", "per server CPU-s", "server busy", "errors", "per round: lowest-highest").leftAlign(1)
		for _, res := range b.Results {
			done := res.Handshakes > 0
			perCPU, rounds := "-", "-"
			if res.HandshakesPerServerCPUSecond > 0 {
				perCPU = num(res.HandshakesPerServerCPUSecond)
			}
			if rs := res.RoundHandshakesPerServerCPUSecond; len(rs) > 0 {
				rounds = num(slices.Min(rs)) + "-" + num(slices.Max(rs))
			}
			t.add(res.Name, num(res.HandshakesPerSec), ms(res.Latency.P50Ms, done), ms(res.Latency.P99Ms, done), perCPU, percent(res.ServerBusy), fmt.Sprint(res.ErrorCount), rounds)
		}
		t.write(w, "  ")
		fmt.Fprintln(w, "\nThis build / baseline, handshakes per server CPU-second, median of the rounds (lowest-highest):")
		t = newTable("scenario", "ratio", "per round").leftAlign(1)
		for _, ra := range b.Ratios {
			per := make([]string, len(ra.Rounds))
			for i, v := range ra.Rounds {
				per[i] = fmt.Sprintf("%.3f", v)
			}
			t.add(ra.Scenario, fmt.Sprintf("%.3f× (%.3f-%.3f)", ra.Summary.Median, ra.Summary.Min, ra.Summary.Max), strings.Join(per, " "))
		}
		t.write(w, "  ")
	}

	if c := r.Comparison; c != nil {
		what := "full handshakes"
		if l.HTTPPath != "" {
			what = "connections (full handshake and one request)"
		}
		fmt.Fprintf(w, "\n%s / %s, %s per server CPU-second: %.2f×\n", c.Numerator, c.Denominator, what, c.Ratio)
	}

	var errLines, mixed []string
	for _, res := range r.Results {
		errLines = append(errLines, countLines(res.Name, res.Errors, true)...)
		distinct := map[string]bool{}
		for l := range res.Negotiated {
			distinct[strings.TrimSuffix(l, " (resumed)")] = true
		}
		if len(distinct) > 1 {
			mixed = append(mixed, countLines(res.Name, res.Negotiated, false)...)
		}
	}
	if len(errLines) > 0 {
		fmt.Fprintln(w, "\nErrors by kind:")
		fmt.Fprint(w, strings.Join(errLines, ""))
	}
	for _, res := range r.Results {
		if res.StoppedEarly {
			fmt.Fprintf(w, "  %s: stopped after %s: every connection failed\n", res.Name, seconds(res.WindowSeconds))
		}
	}
	if len(mixed) > 0 {
		fmt.Fprintln(w, "\nNegotiated (rows are named after the most common):")
		fmt.Fprint(w, strings.Join(mixed, ""))
	}

	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
		for _, warn := range r.Warnings {
			fmt.Fprintln(w, "WARNING: "+warn)
		}
	}

	if len(r.Capacity) > 0 {
		what := "handshake CPU only"
		if l.HTTPPath != "" {
			what = "a handshake and one request each"
		}
		fmt.Fprintf(w, "\nCapacity: server cores for a peak of %s handshakes/s (%s, no headroom):\n", num(r.Capacity[0].Peak), what)
		t := newTable("scenario", "cores", "whole cores").leftAlign(1)
		for _, c := range r.Capacity {
			t.add(c.Scenario, fmt.Sprintf("%.2f", c.Cores), fmt.Sprint(math.Ceil(c.Cores)))
		}
		t.write(w, "  ")
	} else if r.Server.CPUSource == "" {
		fmt.Fprintln(w, "\nCapacity: unknown without the server's CPU time (give --server-pid PID or --metrics URL).")
	}
}

// countLines lists counts as "  row: key ×n" lines, the largest first
// (byCount) or by key.
func countLines(row string, counts map[string]int64, byCount bool) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if byCount {
		slices.SortStableFunc(keys, func(a, b string) int { return int(counts[b] - counts[a]) })
	}
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("  %s: %s ×%d\n", row, k, counts[k])
	}
	return lines
}

func percent(v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "-"
	}
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// handshakeSVG draws a handshake report.
func handshakeSVG(r *HandshakeReport) string {
	m := r.Machine
	footer := fmt.Sprintf("gmgate bench handshake, %s, %d connections, %s measured, server CPUs %s", m.GoVersion, r.Load.Concurrency, seconds(r.Load.DurationSeconds), cpuList(r.Server.CPUs))
	if c := r.Comparison; c != nil {
		footer += fmt.Sprintf("; %s / %s per server CPU-second: %.2f×", c.Numerator, c.Denominator, c.Ratio)
	}
	d := newSVG("Handshakes: "+m.CPUModel, footer)
	var perCPU, rate, p95 []bar
	for _, res := range r.Results {
		c := colourFor(res.Name)
		if res.HandshakesPerServerCPUSecond > 0 {
			perCPU = append(perCPU, bar{res.Name, res.HandshakesPerServerCPUSecond, c, num(res.HandshakesPerServerCPUSecond)})
		}
		rate = append(rate, bar{res.Name, res.HandshakesPerSec, c, num(res.HandshakesPerSec)})
		if res.Handshakes > 0 {
			p95 = append(p95, bar{res.Name, res.Latency.P95Ms, c, fmt.Sprintf("p50 %s / p95 %s / p99 %s ms", num(res.Latency.P50Ms), num(res.Latency.P95Ms), num(res.Latency.P99Ms))})
		}
	}
	d.bars("Handshakes per server CPU-second (one core)", perCPU)
	d.bars("Handshakes per second", rate)
	d.bars("Handshake latency, p95 (ms)", p95)
	return d.String()
}

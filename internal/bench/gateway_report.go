package bench

import (
	"fmt"
	"io"
	"slices"
)

// writeGatewayHead writes what the gateway benchmarks share at the top of
// their reports.
func writeGatewayHead(w io.Writer, title string, h GatewayReportHead) {
	m, s, load := h.Machine, h.Setup, h.LoadAverage
	fmt.Fprintf(w, "gmgate bench %s: %s, %d CPUs, %s/%s, %s\n", title, m.CPUModel, m.NumCPU, m.GOOS, m.GOARCH, m.GoVersion)
	for _, b := range s.Builds {
		v := ""
		if b.Version != "" {
			v = " (" + b.Version + ")"
		}
		fmt.Fprintf(w, "build %q: %s%s\n", b.Name, orDash(b.Path), v)
	}
	where := "unbound"
	if len(s.ServerCPUs) > 0 {
		where = "on CPUs " + cpuList(s.ServerCPUs)
	}
	access := "off"
	if s.AccessLog {
		access = "to a file"
	}
	fmt.Fprintf(w, "gateways: `gmgate serve` in child processes on loopback, %s (GOMAXPROCS %d), access log %s; CPU time from %s\n",
		where, s.GOMAXPROCS, access, s.CPUSource)
	if len(s.LoadCPUs) > 0 {
		fmt.Fprintf(w, "upstream (a child process) and load generator on CPUs %s\n", cpuList(s.LoadCPUs))
	}
	fmt.Fprintf(w, "%d interleaved rounds; figures are the median (lowest-highest) over rounds\n", s.Rounds)
	fmt.Fprintf(w, "load average %s before, %s after\n\n", loadAvg(load[0]), loadAvg(load[1]))
}

// WriteProxyTable writes a ProxyReport as aligned text.
func WriteProxyTable(w io.Writer, r *ProxyReport) {
	writeGatewayHead(w, "proxy", r.GatewayReportHead)
	fmt.Fprintf(w, "load: keep-alive clients, one connection each, GET / for a %d-byte response back to back; %s measured after %s warm-up per round\n\n",
		r.Body, seconds(r.DurationSeconds), seconds(r.WarmupSeconds))
	t := newTable("protocol", "clients", "build", "requests/s", "server CPU ms per 1000 requests", "p50 ms", "p99 ms",
		"added p50 ms", "added p99 ms", "server busy", "load busy", "errors").leftAlign(1)
	t.right[2] = false
	for _, res := range r.Results {
		protocol, build := res.Protocol, res.Build
		cpu, a50, a99, busy := "-", "-", "-", "-"
		// A row without a request answered has no latency to show.
		p50, p99 := "-", "-"
		answered := slices.ContainsFunc(res.Rounds, func(r ProxyRound) bool { return r.Requests > 0 })
		if answered {
			p50, p99 = res.P50Ms.String(), res.P99Ms.String()
		}
		if res.Build == "direct" {
			protocol, build = "HTTP, to the upstream", "-"
		} else {
			cpu, busy = res.ServerCPUPer1000.String(), percent(res.ServerBusy.Median)
			if answered {
				a50, a99 = res.AddedP50Ms.String(), res.AddedP99Ms.String()
			}
		}
		t.add(protocol, fmt.Sprint(res.Clients), build, res.RequestsPerSecond.String(), cpu,
			p50, p99, a50, a99, busy, percent(res.LoadBusy.Median), fmt.Sprint(res.Errors))
	}
	t.write(w, "")
	if len(r.Comparisons) > 0 {
		fmt.Fprintln(w)
		c0 := r.Comparisons[0]
		fmt.Fprintf(w, "%q against %q, per round:\n", c0.Build, c0.Against)
		t := newTable("protocol", "clients", "server CPU per request", "requests/s", "added p99, difference ms").leftAlign(1)
		for _, c := range r.Comparisons {
			t.add(c.Protocol, fmt.Sprint(c.Clients), ratioString(c.ServerCPU), ratioString(c.RequestsPerSecond), c.AddedP99Ms.String())
		}
		t.write(w, "  ")
	}
}

// ratioString writes a Summary of ratios as "0.98× (0.95-1.02)".
func ratioString(s Summary) string {
	return fmt.Sprintf("%.2f× (%.2f-%.2f)", s.Median, s.Min, s.Max)
}

// WriteDownloadTable writes a DownloadReport as aligned text.
func WriteDownloadTable(w io.Writer, r *DownloadReport) {
	writeGatewayHead(w, "download", r.GatewayReportHead)
	fmt.Fprintf(w, "load: one connection per download over %s, GET of %s, timed from the request to the last byte\n\n", r.Protocol, sizeLabel(int(r.Size)))
	header := []string{"build", "MB/s", "server CPU s per GB"}
	if len(r.Results) > 1 {
		header = append(header, "over "+r.Results[len(r.Results)-1].Build)
	}
	t := newTable(header...).leftAlign(1)
	for _, res := range r.Results {
		row := []string{res.Build, res.MBPerSecond.String(), res.ServerCPUPerGB.String()}
		if len(r.Results) > 1 {
			row = append(row, ratioString(res.Ratio))
		}
		t.add(row...)
	}
	t.write(w, "")
}

// WriteIdleTable writes an IdleReport as aligned text.
func WriteIdleTable(w io.Writer, r *IdleReport) {
	writeGatewayHead(w, "idle-conns", r.GatewayReportHead)
	fmt.Fprintf(w, "load: a new gateway per build and round; %d connections over %s, one GET / each, then idle %s; memory is VmRSS from /proc/PID/status\n\n",
		r.Conns, r.Protocol, seconds(r.SettleSeconds))
	t := newTable("build", "KiB per idle connection", "RSS before, MiB", fmt.Sprintf("RSS with %d, MiB", r.Conns)).leftAlign(1)
	for _, res := range r.Results {
		t.add(res.Build, res.KiBPerConn.String(), res.RSSBeforeMiB.String(), res.RSSAfterMiB.String())
	}
	t.write(w, "")
}

// WriteGatewayReport writes a report of RunProxy, RunDownload or
// RunIdleConns as text, or as JSON.
func WriteGatewayReport(w io.Writer, report any, asJSON bool) error {
	if asJSON {
		return WriteJSON(w, report)
	}
	switch r := report.(type) {
	case *ProxyReport:
		WriteProxyTable(w, r)
	case *DownloadReport:
		WriteDownloadTable(w, r)
	case *IdleReport:
		WriteIdleTable(w, r)
	default:
		return fmt.Errorf("no table for %T", report)
	}
	return nil
}

package bench

import "fmt"

// gatewayFooter is the line under a gateway benchmark's chart.
func gatewayFooter(title string, h GatewayReportHead) string {
	m := h.Machine
	return fmt.Sprintf("gmgate bench %s, %s, %s/%s, %d interleaved rounds, medians", title, m.GoVersion, m.GOOS, m.GOARCH, h.Setup.Rounds)
}

// buildColour gives the first build (the one measured against the others)
// the GM hue and every other build the other one.
func buildColour(build, first string) string {
	if build == first {
		return colourGM
	}
	return colourOther
}

// proxySVG draws a proxy report: the gateway's CPU per request, the lower
// the better, and the requests per second, per protocol, clients and build.
func proxySVG(r *ProxyReport) string {
	d := newSVG("Proxied keep-alive requests: "+r.Machine.CPUModel, gatewayFooter("proxy", r.GatewayReportHead))
	first := ""
	var cpu, rps []bar
	for _, res := range r.Results {
		label := fmt.Sprintf("%s, %d clients, %s", res.Protocol, res.Clients, res.Build)
		if res.Build == "direct" {
			label = fmt.Sprintf("HTTP to the upstream, %d clients", res.Clients)
		} else {
			if first == "" {
				first = res.Build
			}
			cpu = append(cpu, bar{label, res.ServerCPUPer1000.Median, buildColour(res.Build, first), fmt.Sprintf("%.1f ms", res.ServerCPUPer1000.Median)})
		}
		rps = append(rps, bar{label, res.RequestsPerSecond.Median, buildColour(res.Build, first), num(res.RequestsPerSecond.Median) + "/s"})
	}
	d.bars("Gateway CPU per 1000 requests (ms; lower is better)", cpu)
	d.bars("Requests per second", rps)
	return d.String()
}

// downloadSVG draws a download report: throughput and CPU per GB per build.
func downloadSVG(r *DownloadReport) string {
	d := newSVG(fmt.Sprintf("Download of %s over %s: %s", sizeLabel(int(r.Size)), r.Protocol, r.Machine.CPUModel), gatewayFooter("download", r.GatewayReportHead))
	var mbs, cpu []bar
	for _, res := range r.Results {
		colour := buildColour(res.Build, r.Results[0].Build)
		mbs = append(mbs, bar{res.Build, res.MBPerSecond.Median, colour, fmt.Sprintf("%.0f MB/s", res.MBPerSecond.Median)})
		cpu = append(cpu, bar{res.Build, res.ServerCPUPerGB.Median, colour, fmt.Sprintf("%.2f s", res.ServerCPUPerGB.Median)})
	}
	d.bars("Throughput (MB/s)", mbs)
	d.bars("Gateway CPU per GB (s; lower is better)", cpu)
	return d.String()
}

// idleSVG draws an idle-connections report: memory per idle connection.
func idleSVG(r *IdleReport) string {
	d := newSVG(fmt.Sprintf("%d idle connections over %s: %s", r.Conns, r.Protocol, r.Machine.CPUModel), gatewayFooter("idle-conns", r.GatewayReportHead))
	var kib []bar
	for _, res := range r.Results {
		kib = append(kib, bar{res.Build, res.KiBPerConn.Median, buildColour(res.Build, r.Results[0].Build), fmt.Sprintf("%.1f KiB", res.KiBPerConn.Median)})
	}
	d.bars("Memory per idle connection (KiB; lower is better)", kib)
	return d.String()
}

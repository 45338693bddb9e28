package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cpuMetric is the Prometheus counter of a process's CPU time in seconds.
const cpuMetric = "process_cpu_seconds_total"

// scrapeCPU reads process_cpu_seconds_total from a Prometheus text
// endpoint (gmgate serve's admin /metrics).
func scrapeCPU(ctx context.Context, client *http.Client, url string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("metrics URL %q: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the target's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the target's metrics: %s answered %s", url, resp.Status)
	}
	v, err := parseCPUMetric(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("reading the target's metrics from %s: %w", url, err)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// parseCPUMetric finds the value of process_cpu_seconds_total in the
// Prometheus text exposition format.
func parseCPUMetric(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, cpuMetric) {
			continue
		}
		rest := line[len(cpuMetric):]
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		} else if rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue // a longer metric name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("bad %s value %q", cpuMetric, fields[0])
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in the metrics (is this the admin /metrics of gmgate serve?)", cpuMetric)
}

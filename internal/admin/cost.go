package admin

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// costSamples is how many samples the cost view keeps (10 minutes at
// the default 5 s).
const costSamples = 120

// costSample is the counters the cost view derives rates from, at one
// moment.
type costSample struct {
	at         time.Time
	handshakes float64 // successful client handshakes
	cpuSeconds float64 // process_cpu_seconds_total
	accelOps   map[string]float64
}

// costSampler samples the registry's counters at intervals: the rates
// between samples are the "what does the gateway cost" view.
type costSampler struct {
	reg prometheus.Gatherer
	now func() time.Time

	mu      sync.Mutex
	samples []costSample // oldest first, at most costSamples
}

func newCostSampler(reg prometheus.Gatherer, now func() time.Time) *costSampler {
	return &costSampler{reg: reg, now: now}
}

func (c *costSampler) run(ctx context.Context, every time.Duration, done chan<- struct{}) {
	defer close(done)
	c.sample()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sample()
		}
	}
}

func (c *costSampler) sample() {
	fam := gather(c.reg)
	s := costSample{at: c.now(), accelOps: map[string]float64{}}
	s.handshakes = fam.sum("gmgate_handshakes_total", map[string]string{"result": "ok"})
	s.cpuSeconds = fam.sum("process_cpu_seconds_total", nil)
	fam.each("gmgate_accel_ops_total", func(m *dto.Metric) {
		s.accelOps[labelOf(m, "backend")] += value(m)
	})
	c.mu.Lock()
	if len(c.samples) == costSamples {
		copy(c.samples, c.samples[1:])
		c.samples = c.samples[:costSamples-1]
	}
	c.samples = append(c.samples, s)
	c.mu.Unlock()
}

// costPoint is the rates between two samples.
type costPoint struct {
	Time                time.Time `json:"time"`
	HandshakesPerSecond float64   `json:"handshakes_per_second"`
	// CPUSecondsPerSecond is the process's CPU use, in cores.
	CPUSecondsPerSecond float64 `json:"cpu_seconds_per_second"`
	// HandshakesPerCPUSecond is handshakes per second of CPU the whole
	// process used (0 when it used none).
	HandshakesPerCPUSecond float64 `json:"handshakes_per_cpu_second"`
	AccelOpsPerSecond      float64 `json:"accel_ops_per_second"`
}

func (c *costSampler) points() []costPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]costPoint, 0, len(c.samples))
	for i := 1; i < len(c.samples); i++ {
		a, b := c.samples[i-1], c.samples[i]
		d := b.at.Sub(a.at).Seconds()
		if d <= 0 {
			continue
		}
		p := costPoint{Time: b.at.UTC(), HandshakesPerSecond: (b.handshakes - a.handshakes) / d, CPUSecondsPerSecond: (b.cpuSeconds - a.cpuSeconds) / d}
		if cpu := b.cpuSeconds - a.cpuSeconds; cpu > 0 {
			p.HandshakesPerCPUSecond = (b.handshakes - a.handshakes) / cpu
		}
		for k, v := range b.accelOps {
			p.AccelOpsPerSecond += (v - a.accelOps[k]) / d
		}
		out = append(out, p)
	}
	return out
}

// accelRates are the key operations per second of each backend between
// the last two samples.
func (c *costSampler) accelRates() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]float64{}
	if n := len(c.samples); n >= 2 {
		a, b := c.samples[n-2], c.samples[n-1]
		if d := b.at.Sub(a.at).Seconds(); d > 0 {
			for k, v := range b.accelOps {
				out[k] = (v - a.accelOps[k]) / d
			}
		}
	}
	return out
}

func (h *Handler) costView(*http.Request) any {
	fam := gather(h.o.Metrics.Registry)
	hs := fam.sum("gmgate_handshakes_total", map[string]string{"result": "ok"})
	cpu := fam.sum("process_cpu_seconds_total", nil)
	total := map[string]float64{"handshakes": hs, "cpu_seconds": cpu}
	if cpu > 0 {
		total["handshakes_per_cpu_second"] = hs / cpu
	}
	return map[string]any{
		"interval_seconds": h.o.SampleEvery.Seconds(),
		"points":           h.cost.points(),
		"since_start":      total,
	}
}

package admin

import (
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// families reads the registry once: the views that come from the metrics
// read them from the same registry /metrics serves.
type families map[string]*dto.MetricFamily

func gather(g prometheus.Gatherer) families {
	out := families{}
	mfs, _ := g.Gather() // a failed collector leaves its family out
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sum adds the series of name whose labels match want (every label in
// want has that value).
func (f families) sum(name string, want map[string]string) float64 {
	total := 0.0
	mf := f[name]
	if mf == nil {
		return 0
	}
next:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			if labelOf(m, k) != v {
				continue next
			}
		}
		total += value(m)
	}
	return total
}

// each calls fn for every series of name.
func (f families) each(name string, fn func(m *dto.Metric)) {
	if mf := f[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			fn(m)
		}
	}
}

// Percentiles are latencies in milliseconds read off a histogram.
type Percentiles struct {
	Count uint64   `json:"count"`
	P50   *float64 `json:"p50_ms"`
	P90   *float64 `json:"p90_ms"`
	P99   *float64 `json:"p99_ms"`
}

// percentiles estimates p50, p90 and p99 from the histogram's buckets as
// Prometheus's histogram_quantile does: linear within the bucket. nil
// fields when there is no observation.
func percentiles(h *dto.Histogram) Percentiles {
	p := Percentiles{Count: h.GetSampleCount()}
	if p.Count == 0 {
		return p
	}
	buckets := h.GetBucket()
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].GetUpperBound() < buckets[j].GetUpperBound() })
	q := func(q float64) *float64 {
		rank := q * float64(p.Count)
		prevBound, prevCount := 0.0, 0.0
		for _, b := range buckets {
			c := float64(b.GetCumulativeCount())
			if c >= rank {
				ub := b.GetUpperBound()
				if math.IsInf(ub, 1) {
					ub = prevBound
				}
				v := ub
				if c > prevCount {
					v = prevBound + (ub-prevBound)*(rank-prevCount)/(c-prevCount)
				}
				ms := math.Round(v*1e6) / 1e3
				return &ms
			}
			prevBound, prevCount = b.GetUpperBound(), c
		}
		ms := math.Round(prevBound*1e6) / 1e3
		return &ms
	}
	p.P50, p.P90, p.P99 = q(.5), q(.9), q(.99)
	return p
}

package bench

import (
	"slices"
	"time"
)

// LatencyStats summarises latencies in milliseconds.
type LatencyStats struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// summarize sorts ds in place and returns its percentiles (nearest rank).
func summarize(ds []time.Duration) LatencyStats {
	if len(ds) == 0 {
		return LatencyStats{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return LatencyStats{
		Count:  int64(len(ds)),
		MeanMs: ms(sum) / float64(len(ds)),
		P50Ms:  ms(percentile(ds, 0.50)),
		P95Ms:  ms(percentile(ds, 0.95)),
		P99Ms:  ms(percentile(ds, 0.99)),
		MaxMs:  ms(ds[len(ds)-1]),
	}
}

// percentile returns the nearest-rank percentile of sorted ds.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

package bench

import (
	"bytes"
	"regexp"
	"testing"
)

// A proxy row whose every request failed shows no latency ("-"), where 0
// would read as instant; a row with requests shows its figures.
func TestProxyTableFailedRowHasNoLatency(t *testing.T) {
	rep := &ProxyReport{Results: []ProxyResult{
		{Build: "new", Protocol: "TLCP", Clients: 4, Errors: 120, Rounds: []ProxyRound{{Errors: 120, Seconds: 1}}},
		{Build: "old", Protocol: "TLCP", Clients: 4, P50Ms: Summary{Median: 1.5, Min: 1.2, Max: 1.8}, P99Ms: Summary{Median: 3, Min: 2, Max: 4},
			Rounds: []ProxyRound{{Requests: 1000, Seconds: 1, P50Ms: 1.5, P99Ms: 3}}},
	}}
	var b bytes.Buffer
	WriteProxyTable(&b, rep)
	if !regexp.MustCompile(`(?m)^TLCP\s+4\s+new\s+0 \(0-0\)\s+0 \(0-0\)\s+-\s+-\s+-\s+-\s`).MatchString(b.String()) {
		t.Errorf("the failed row:\n%s", b.String())
	}
	if !regexp.MustCompile(`(?m)^TLCP\s+4\s+old\s.*1\.50 \(1\.20-1\.80\)\s+3\.00 \(2\.00-4\.00\)`).MatchString(b.String()) {
		t.Errorf("the measured row:\n%s", b.String())
	}
}

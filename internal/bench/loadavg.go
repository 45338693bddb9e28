package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// loadAverage is the 1-minute load average, or -1 where it cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

func loadAvg(v float64) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f", v)
}

package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// cpuTimes are one CPU's busy and total jiffies from /proc/stat.
type cpuTimes struct{ busy, total uint64 }

// readCPUTimes reads every CPU's times; nil where /proc/stat is missing.
func readCPUTimes() map[int]cpuTimes {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[int]cpuTimes{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		id, err := strconv.Atoi(fields[0][3:])
		if err != nil {
			continue
		}
		var t cpuTimes
		for i, v := range fields[1:] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				break
			}
			// user nice system idle iowait irq softirq steal (guest
			// time is already in user and nice).
			if i >= 8 {
				break
			}
			t.total += n
			if i != 3 && i != 4 {
				t.busy += n
			}
		}
		out[id] = t
	}
	return out
}

// othersBusy is the share of time the CPUs other than self were busy
// between two readings; -1 when unknown.
func othersBusy(before, after map[int]cpuTimes, self int) float64 {
	var busy, total uint64
	for id, a := range after {
		b, ok := before[id]
		if id == self || !ok || a.total < b.total || a.busy < b.busy {
			continue
		}
		busy += a.busy - b.busy
		total += a.total - b.total
	}
	if total == 0 {
		return -1
	}
	return float64(busy) / float64(total)
}

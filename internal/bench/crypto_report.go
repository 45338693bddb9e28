package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// noisyShare is the CPU share below which a figure is marked: the
// measuring thread was off its core for more than 5% of the loop.
const noisyShare = 0.95

// busyNeighbours is the share of time the other CPUs may be busy before a
// figure is marked as taken beside other work.
const busyNeighbours = 0.25

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteCryptoTable writes the report as aligned text tables.
func WriteCryptoTable(w io.Writer, r *CryptoReport) {
	m := r.Machine
	fmt.Fprintf(w, "gmgate bench crypto: %s, %d CPUs, %s/%s, %s, gmsm %s\n", m.CPUModel, m.NumCPU, m.GOOS, m.GOARCH, m.GoVersion, m.GMSMVersion)
	writeWarnings(w, m)
	fmt.Fprintf(w, "one goroutine pinned to CPU %d; each figure a %s loop after %s of warm-up; load average %s before, %s after\n",
		r.PinnedCPU, seconds(r.DurationSeconds), seconds(r.WarmupSeconds), loadAvg(r.LoadAverage[0]), loadAvg(r.LoadAverage[1]))
	fmt.Fprintln(w)
	writeFeatures(w, m.Features)
	fmt.Fprintln(w, "GM implementations in use (as gmsm chooses them on this machine):")
	for _, im := range r.Implementations {
		fmt.Fprintf(w, "  %-8s %s\n", im.Algorithm, im.Code)
	}
	if len(m.Dispatch) > 0 {
		fmt.Fprintln(w, "gmgate's dispatch (gmgate version --cpu):")
		for _, d := range m.Dispatch {
			ct := "constant-time"
			if !d.ConstantTime {
				ct = "NOT constant-time"
			}
			fmt.Fprintf(w, "  %-16s %s; %s\n", d.Primitive, d.Implementation, ct)
		}
	}
	noisy, neighbours := false, false
	mark := func(res CryptoResult, s string) string {
		if res.CPUShare > 0 && res.CPUShare < noisyShare {
			noisy = true
			return s + "~"
		}
		if res.OthersBusy > busyNeighbours {
			neighbours = true
			return s + "*"
		}
		return s
	}

	if rs := resultsIn(r.Results, GroupPublicKey); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Public-key operations, per core:")
		t := newTable("algorithm", "operation", "ops/s", "µs/op").leftAlign(2)
		for _, res := range rs {
			t.add(res.Algorithm, res.Operation, mark(res, num(res.OpsPerSec)), num(res.NsPerOp/1e3))
		}
		t.write(w, "  ")
	}

	if rs := resultsIn(r.Results, GroupSM2PKE); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "SM2 encryption by message size, ops/s per core:")
		writeBySize(w, rs, func(res CryptoResult) string { return mark(res, num(res.OpsPerSec)) })
	}

	if rs := resultsIn(r.Results, GroupThroughput); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Throughput by message size, MB/s per core (1 MB = 10^6 bytes):")
		writeBySize(w, rs, func(res CryptoResult) string { return mark(res, num(res.MBPerSec)) })
	}

	if rs := resultsIn(r.Results, GroupBackend); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Server private-key operations through accel, per core:")
		t := newTable("backend", "operation", "ops/s", "µs/op").leftAlign(2)
		for _, res := range rs {
			t.add(res.Backend, res.Operation, mark(res, num(res.OpsPerSec)), num(res.NsPerOp/1e3))
		}
		t.write(w, "  ")
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	if noisy || neighbours {
		fmt.Fprintln(w)
	}
	if noisy {
		fmt.Fprintf(w, "~ the measuring thread had its core less than %.0f%% of the time: other work shared it, and the figure is low.\n", noisyShare*100)
	}
	if neighbours {
		fmt.Fprintf(w, "* the other CPUs were more than %.0f%% busy meanwhile; on a virtual machine or with shared caches that can lower the figure.\n", busyNeighbours*100)
	}
}

func writeFeatures(w io.Writer, fs []Feature) {
	var have, lack []string
	for _, f := range fs {
		if f.Present {
			have = append(have, f.Name)
		} else {
			lack = append(lack, f.Name)
		}
	}
	if len(fs) == 0 {
		fmt.Fprintln(w, "CPU features: not inspected on this architecture")
		return
	}
	fmt.Fprintf(w, "CPU features present: %s\n", strings.Join(orNone(have), " "))
	fmt.Fprintf(w, "CPU features absent:  %s\n", strings.Join(orNone(lack), " "))
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	return s
}

// writeBySize writes one row per algorithm and operation and one column
// per size.
func writeBySize(w io.Writer, rs []CryptoResult, cell func(CryptoResult) string) {
	var sizes []int
	type rowKey struct{ alg, op string }
	var keys []rowKey
	cells := map[rowKey]map[int]string{}
	for _, res := range rs {
		if !slices.Contains(sizes, res.Size) {
			sizes = append(sizes, res.Size)
		}
		k := rowKey{res.Algorithm, res.Operation}
		if cells[k] == nil {
			cells[k] = map[int]string{}
			keys = append(keys, k)
		}
		cells[k][res.Size] = cell(res)
	}
	slices.Sort(sizes)
	header := []string{"algorithm", "operation"}
	for _, s := range sizes {
		header = append(header, sizeLabel(s))
	}
	t := newTable(header...).leftAlign(2)
	for _, k := range keys {
		row := []string{k.alg, k.op}
		for _, s := range sizes {
			c, ok := cells[k][s]
			if !ok {
				c = "-"
			}
			row = append(row, c)
		}
		t.add(row...)
	}
	t.write(w, "  ")
}

func resultsIn(rs []CryptoResult, group string) []CryptoResult {
	var out []CryptoResult
	for _, r := range rs {
		if r.Group == group {
			out = append(out, r)
		}
	}
	return out
}

func seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%gs", s)
}

package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// valueRange is what a numeric flag of the bench commands accepts. A
// value given is used as given or refused; a flag not given holds the
// default its definition shows in --help.
type valueRange struct {
	// min is the least value accepted; with above, values must exceed it.
	min   float64
	above bool
	// max is the greatest value accepted; 0 for no bound.
	max float64
	// multiple, when set, is what values must be a multiple of.
	multiple int64
	// accepts says what the flag takes, for the refusal.
	accepts string
}

var (
	positiveDuration = valueRange{above: true, accepts: "a duration above 0"}
	atLeastOne       = valueRange{min: 1, accepts: "1 or more"}
)

// benchFlagRanges are the ranges of the numeric flags of the bench
// commands, by name: a name means the same on every command.
var benchFlagRanges = map[string]valueRange{
	"duration":     positiveDuration,
	"timeout":      positiveDuration,
	"warmup":       {accepts: "0 (no warm-up) or a longer duration"},
	"settle":       {accepts: "0 (no wait) or a longer duration"},
	"rounds":       atLeastOne,
	"concurrency":  atLeastOne,
	"conns":        atLeastOne,
	"server-cores": atLeastOne,
	"server-pid":   atLeastOne,
	"retries":      {accepts: "0 (each figure once) or more"},
	"cpu":          {accepts: "a CPU number, 0 or more"},
	"rate":         {accepts: "0 (no limit) or more new connections per second"},
	"peak":         {accepts: "0 (no capacity lines) or more handshakes per second"},
	"resume":       {max: 1, accepts: "a number from 0 to 1"},
	"body":         {min: 1, accepts: "1 or more bytes"},
	"http-body":    {min: 1, max: bench.MaxHTTPBody, accepts: fmt.Sprintf("1 to %d bytes", bench.MaxHTTPBody)},
	"clients":      {min: 1, max: bench.MaxClients, accepts: fmt.Sprintf("1 to %d", bench.MaxClients)},
	"size-mib":     {min: 1, max: bench.MaxDownloadSize >> 20, accepts: fmt.Sprintf("1 to %d MiB", bench.MaxDownloadSize>>20)},
	"sizes": {min: 16, max: bench.MaxMessageSize, multiple: 16,
		accepts: fmt.Sprintf("multiples of 16 from 16 to %d bytes (whole SM4 blocks)", bench.MaxMessageSize)},
}

// checkBenchFlags refuses a numeric flag given a value out of its range,
// naming the flag, the value and the range, before anything is measured.
func checkBenchFlags(cmd *cobra.Command, _ []string) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		r, ok := benchFlagRanges[f.Name]
		if !ok || !f.Changed || err != nil {
			return
		}
		values := []string{f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			values = sv.GetSlice()
		}
		for _, v := range values {
			if err = r.check(f, v); err != nil {
				return
			}
		}
	})
	return err
}

// check refuses value, a value of f, when it is out of the range.
func (r valueRange) check(f *pflag.Flag, value string) error {
	var x float64
	var err error
	switch f.Value.Type() {
	case "duration":
		var d time.Duration
		d, err = time.ParseDuration(value)
		x = d.Seconds()
	case "float64":
		x, err = strconv.ParseFloat(value, 64)
	default:
		var n int64
		n, err = strconv.ParseInt(value, 10, 64)
		x = float64(n)
		if err == nil && r.multiple != 0 && n%r.multiple != 0 {
			x = math.NaN()
		}
	}
	inRange := x >= r.min && !(r.above && x == r.min) && (r.max == 0 || x <= r.max) && !math.IsInf(x, 0)
	if err == nil && inRange {
		return nil
	}
	msg := fmt.Sprintf("--%s %s: give %s", f.Name, value, r.accepts)
	if !zeroDefault(f) {
		msg += " (default " + strings.Trim(f.DefValue, "[]") + ")"
	}
	return fmt.Errorf("%s", msg)
}

// zeroDefault reports whether f's default is its type's zero value,
// which --help does not show: the flag's usage says it in words.
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "0", "0s", "[]", "":
		return true
	}
	return false
}

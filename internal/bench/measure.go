package bench

import (
	"errors"
	"time"
)

// Sample is the outcome of one timed loop.
type Sample struct {
	// Iterations is how many times the operation ran in the timed loop.
	Iterations int64
	// Elapsed is the wall-clock time of the timed loop.
	Elapsed time.Duration
	// ThreadCPU is the CPU time the measuring thread used during the loop;
	// zero where the platform cannot tell.
	ThreadCPU time.Duration
}

// NsPerOp is the wall-clock time of one operation.
func (s Sample) NsPerOp() float64 {
	if s.Iterations == 0 {
		return 0
	}
	return float64(s.Elapsed.Nanoseconds()) / float64(s.Iterations)
}

// OpsPerSec is the number of operations per wall-clock second.
func (s Sample) OpsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Iterations) / s.Elapsed.Seconds()
}

// CPUShare is the share of the loop's wall-clock time that the measuring
// thread spent on a CPU: close to 1 on a quiet machine, lower when other
// work took the core away. Zero when unknown.
func (s Sample) CPUShare() float64 {
	if s.Elapsed <= 0 || s.ThreadCPU <= 0 {
		return 0
	}
	return s.ThreadCPU.Seconds() / s.Elapsed.Seconds()
}

// opLoop runs an operation n times. It returns the first error, after which
// the measurement stops.
type opLoop func(n int64) error

// measure times loop on the calling goroutine. It first runs loop for the
// warm-up time (results discarded) while calibrating how long one
// operation takes, then runs it in one timed batch sized to last about d,
// repeating with a larger batch when the estimate fell short, as the
// testing package does for benchmarks.
func measure(loop opLoop, d, warmup time.Duration) (Sample, error) {
	if d <= 0 {
		return Sample{}, errors.New("measurement time must be positive")
	}
	per, err := calibrate(loop, warmup)
	if err != nil {
		return Sample{}, err
	}
	for attempt := 0; ; attempt++ {
		n := max(int64(float64(d)/per), 1)
		s, err := timed(loop, n)
		if err != nil {
			return Sample{}, err
		}
		// Accept the batch when it lasted nearly as long as asked; a
		// batch far too short means the estimate was off (a cold first
		// run, a slow machine), so estimate again from this batch.
		if s.Elapsed >= d*9/10 || attempt == 4 {
			return s, nil
		}
		per = max(s.NsPerOp(), 1)
	}
}

// calibrate runs loop in growing batches until at least warmup has passed
// (and at least one batch of 1) and returns the estimated nanoseconds per
// operation from the last batch.
func calibrate(loop opLoop, warmup time.Duration) (float64, error) {
	start := time.Now()
	n := int64(1)
	for {
		s, err := timed(loop, n)
		if err != nil {
			return 0, err
		}
		per := max(s.NsPerOp(), 1)
		spent := time.Since(start)
		if spent >= warmup {
			return per, nil
		}
		// Aim the next batch at a tenth of the remaining warm-up, growing
		// at most a hundredfold at a time.
		want := int64(float64(warmup-spent) / 10 / per)
		n = min(max(want, n+1), 100*n)
	}
}

// timed runs loop(n) once and measures it.
func timed(loop opLoop, n int64) (Sample, error) {
	cpu0 := threadCPUTime()
	t0 := time.Now()
	err := loop(n)
	elapsed := time.Since(t0)
	cpu1 := threadCPUTime()
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Iterations: n, Elapsed: elapsed}
	if cpu0 > 0 && cpu1 >= cpu0 {
		s.ThreadCPU = cpu1 - cpu0
	}
	return s, nil
}

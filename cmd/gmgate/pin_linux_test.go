//go:build linux

package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// pinReplicaB binds every thread of this process, and so the processes it
// starts, to the CPUs other than 0, and returns the command prefix that
// runs replica b on CPU 0 alone; nil (nothing pinned) with one CPU, without
// taskset or with GMGATE_BENCH_PIN=0.
func pinReplicaB(t testing.TB) []string {
	t.Helper()
	taskset, err := exec.LookPath("taskset")
	if os.Getenv("GMGATE_BENCH_PIN") == "0" || err != nil || runtime.NumCPU() < 2 {
		t.Log("replica b is not pinned to a CPU of its own")
		return nil
	}
	var set, all unix.CPUSet
	for c := 1; c < runtime.NumCPU(); c++ {
		set.Set(c)
	}
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	setAll := func(s *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, s); err != nil && err != unix.ESRCH {
				return err
			}
		}
		return nil
	}
	if err := setAll(&set); err != nil {
		t.Fatalf("pinning the load to CPUs 1-%d: %v", runtime.NumCPU()-1, err)
	}
	t.Cleanup(func() { _ = setAll(&all) })
	return []string{taskset, "-c", "0"}
}

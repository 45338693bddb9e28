//go:build !linux

package main

import "testing"

// pinReplicaB pins nothing here: BenchmarkReplicaResumption leaves its
// processes to the scheduler.
func pinReplicaB(t testing.TB) []string {
	t.Log("replica b is not pinned to a CPU of its own on this platform")
	return nil
}

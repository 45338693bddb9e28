// Package testwait waits in tests for something that happens in the
// background.
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it holds, failing the test after a generous bound
// (what names what was awaited): it asserts an outcome, not a speed.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

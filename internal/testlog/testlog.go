// Package testlog is a log sink for tests: the code under test writes to
// it from its goroutines while the test reads what was written.
//
// It is for tests only and imports nothing but the standard library.
package testlog

import (
	"strings"
	"sync"
)

// Buffer collects what is written to it, safely for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

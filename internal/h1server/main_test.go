package h1server

import (
	"testing"

	"go.uber.org/goleak"
)

// Every connection's goroutines end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

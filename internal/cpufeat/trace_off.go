//go:build !gmgate_sm4trace

package cpufeat

// Tracing is false: this build does not count gmsm's table-driven SM4
// (see sm4trace).
const Tracing = false

// TableCalls is 0: this build does not count.
func TableCalls() int64 { return 0 }

// TraceSkip is what the tests that need the count say when they skip.
const TraceSkip = "build with the overlay of go run ./internal/cpufeat/sm4trace and -tags gmgate_sm4trace to count table-driven SM4"

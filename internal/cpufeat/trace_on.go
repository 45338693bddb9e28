//go:build gmgate_sm4trace

package cpufeat

import (
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// Tracing is true in a build made with the overlay of sm4trace: gmsm
// counts its table-driven SM4 blocks and key schedules.
const Tracing = true

//go:linkname traceTableCalls github.com/emmansun/gmsm/internal/sm4.traceTableCalls
var traceTableCalls atomic.Int64

// TableCalls is how many SM4 blocks and key schedules gmsm has computed
// with its lookup tables in this process.
func TableCalls() int64 { return traceTableCalls.Load() }

// TraceSkip is unused in this build.
const TraceSkip = ""

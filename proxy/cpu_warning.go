package proxy

import (
	"log/slog"

	"github.com/gmgate/gmgate/internal/cpufeat"
)

// warnCPU says once, at start, what an operator must know about the CPU:
// that SM4 has no constant-time path on it, or that GMGATE_CPU_DISABLE
// names a feature gmgate does not know.
func warnCPU(log *slog.Logger) {
	if err := cpufeat.HostError(); err != nil {
		log.Warn("ignored part of "+cpufeat.EnvDisable, "cause", err.Error())
	}
	if w := cpufeat.Current().Warning(); w != "" {
		log.Warn("SM4 is not constant-time on this CPU; see gmgate version --cpu and docs/platforms.md", "detail", w)
	}
}

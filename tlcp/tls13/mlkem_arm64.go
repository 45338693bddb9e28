//go:build arm64 && !purego

package tls13

import "golang.org/x/sys/cpu"

// mlkemUsable: gmsm's arm64 ML-KEM code (mlkem/field_arm64.s) uses the
// ARMv8.1 rounding doubling multiply-accumulate instructions (SQRDMLAH)
// without checking for them, so on an ARMv8.0 core (Cortex-A72, as in
// Kunpeng 916 or Phytium FT-2000+) any ML-KEM operation dies with SIGILL.
// There the hybrid group is left out and curveSM2 alone is used.
var mlkemUsable = cpu.ARM64.HasASIMDRDM

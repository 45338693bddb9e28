// Package cpufeat decides, from the features of the CPU gmgate runs on,
// which implementation of SM4-CBC, SM4-GCM, single SM4 blocks, SM3 and
// SM2 serves each operation, whether each is constant-time, and which
// cipher suite is the fastest to prefer.
//
// The decision is one table (Choose) from a feature set to a Plan, so that
// tests run it for CPUs other than the one they run on. The features are
// those golang.org/x/sys/cpu detects, less those named in the environment
// variable GMGATE_CPU_DISABLE (for example "avx512,gfni", or "aes" to see
// what a CPU without AES instructions gets): an operator turns off a path
// that misbehaves, a test or a benchmark runs the path of another CPU.
//
// Turning a feature off changes gmgate's own dispatch only. gmsm, which
// does the bulk of SM4-GCM, SM3 and SM2, makes its own choices from the
// CPU (and its own variables: DISABLE_GFNI, DISABLE_SM4NI, DISABLE_SM3NI).
//
// The package must not import tlcp or accel: both depend on it.
package cpufeat

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// EnvDisable names the environment variable that turns features off: a
// comma-separated list of feature names (see Names).
const EnvDisable = "GMGATE_CPU_DISABLE"

// Feature is one CPU feature that the dispatch depends on.
type Feature uint32

// The features. The x86 ones are only set on amd64, the ARM ones on arm64,
// LSX and LASX on loong64.
const (
	AES         Feature = 1 << iota // x86 AES-NI or the ARMv8 AES instructions
	CLMUL                           // x86 PCLMULQDQ or ARMv8 PMULL: GHASH without tables
	AVX2                            // x86
	AVX512                          // x86 AVX-512 F and VL
	GFNI                            // x86 Galois field instructions
	SM3                             // ARMv8.2 SM3 instructions
	SM4                             // ARMv8.2 SM4 instructions
	LSX                             // LoongArch 128-bit vectors
	LASX                            // LoongArch 256-bit vectors
	VPCLMUL                         // x86 VPCLMULQDQ on 512-bit registers, with AVX-512 BW
	numFeatures = iota
)

var featureNames = [numFeatures]string{"aes", "clmul", "avx2", "avx512", "gfni", "sm3", "sm4", "lsx", "lasx", "vpclmul"}

// Names lists the feature names GMGATE_CPU_DISABLE accepts.
func Names() []string { return slices.Clone(featureNames[:]) }

// Set is a set of features.
type Set uint32

// Has reports whether all of f are in the set.
func (s Set) Has(f Feature) bool { return Set(f)&s == Set(f) }

// String lists the features by name, "none" for the empty set.
func (s Set) String() string {
	var names []string
	for i, n := range featureNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}

// ParseSet parses a comma- or space-separated list of feature names.
func ParseSet(list string) (Set, error) {
	var s Set
	for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		i := slices.Index(featureNames[:], strings.ToLower(name))
		if i < 0 {
			return 0, fmt.Errorf("unknown CPU feature %q; known: %s", name, strings.Join(featureNames[:], ", "))
		}
		s |= 1 << i
	}
	return s, nil
}

// CPU is what the dispatch decides from: the architecture, whether the
// build is portable Go only (the purego build tag), and the features.
type CPU struct {
	Arch     string // GOARCH
	Purego   bool
	Features Set
	// Detected is what the CPU reports and Disabled what GMGATE_CPU_DISABLE
	// turned off; Features is Detected without Disabled.
	Detected, Disabled Set
}

var (
	hostOnce sync.Once
	host     CPU
	hostErr  error
)

// Host returns the CPU this process runs on, with GMGATE_CPU_DISABLE
// applied. A malformed GMGATE_CPU_DISABLE is reported by HostError; the
// names it does know are still turned off.
func Host() CPU {
	hostOnce.Do(func() { host, hostErr = hostWith(os.Getenv(EnvDisable)) })
	return host
}

// hostWith is Host with disable for the value of GMGATE_CPU_DISABLE.
func hostWith(disable string) (CPU, error) {
	c := CPU{Arch: runtime.GOARCH, Purego: purego, Detected: detect()}
	var bad error
	for _, name := range strings.FieldsFunc(disable, func(r rune) bool { return r == ',' || r == ' ' }) {
		s, err := ParseSet(name)
		if err != nil {
			bad = fmt.Errorf("%s: %w", EnvDisable, err)
			continue
		}
		c.Disabled |= s
	}
	c.Features = c.Detected &^ c.Disabled
	return c, bad
}

// HostError is the problem with GMGATE_CPU_DISABLE, if any.
func HostError() error {
	Host()
	return hostErr
}

package bench

import (
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/gmgate/gmgate/internal/cpufeat"
	"golang.org/x/sys/cpu"
)

// Implementation says which code gmsm runs for one GM algorithm on this
// machine, and why.
type Implementation struct {
	Algorithm string `json:"algorithm"`
	Code      string `json:"code"`
}

// GMImplementations mirrors how gmsm v0.44.1 chooses its code: by
// architecture (its build tags), the purego build tag, the CPU features it
// tests at start-up and the environment variables it reads (DISABLE_GFNI,
// FORCE_SM4BLOCK_AESNI, DISABLE_SM3NI, DISABLE_SM4NI).
func GMImplementations() []Implementation {
	return gmImplementations(runtime.GOARCH, puregoBuild, os.Getenv)
}

// Architectures on which gmsm has assembly for each algorithm (the build
// constraints of internal/sm2ec, internal/sm3 and internal/sm4).
var (
	sm2AsmArchs = []string{"amd64", "arm64", "loong64", "riscv64", "s390x", "ppc64le"}
	sm3AsmArchs = []string{"amd64", "arm64", "ppc64", "ppc64le", "s390x", "loong64", "riscv64"}
	sm4AsmArchs = []string{"amd64", "arm64", "ppc64", "ppc64le", "loong64"}
)

func gmImplementations(arch string, purego bool, getenv func(string) string) []Implementation {
	const goCode = "portable Go"
	if purego {
		why := goCode + " (built with the purego tag)"
		return []Implementation{{"SM2", why}, {"SM3", why}, {"SM4", why}, {"SM4-CBC", why}, {"SM4-GCM", why}}
	}
	switch arch {
	case "amd64":
		return amd64Implementations(getenv)
	case "arm64":
		return arm64Implementations(getenv)
	}
	pick := func(archs []string) string {
		if slices.Contains(archs, arch) {
			return arch + " assembly (features not inspected on this architecture)"
		}
		return goCode
	}
	return []Implementation{
		{"SM2", pick(sm2AsmArchs)},
		{"SM3", pick(sm3AsmArchs)},
		{"SM4", pick(sm4AsmArchs)},
		{"SM4-CBC", pick(sm4AsmArchs)},
		{"SM4-GCM", pick(sm4AsmArchs)},
	}
}

func amd64Implementations(getenv func(string) string) []Implementation {
	x := cpu.X86
	gfni := hasFeature(cpuFeatures(), "GFNI")

	// internal/sm2ec: field arithmetic switches on supportBMI2 (ADX and
	// BMI2 both), table selection on supportAVX2.
	sm2 := "amd64 assembly, precomputed base-point table; field multiply with "
	if x.HasADX && x.HasBMI2 {
		sm2 += "MULX/ADCX/ADOX (BMI2+ADX)"
	} else {
		sm2 += "MULQ (no BMI2+ADX)"
	}
	if x.HasAVX2 {
		sm2 += ", AVX2 constant-time table lookups"
	}

	// internal/sm3: useAVX2 = AVX2 && BMI2, else SSSE3, else Go.
	var sm3 string
	switch {
	case x.HasAVX2 && x.HasBMI2:
		sm3 = "AVX2+BMI2 assembly"
	case x.HasSSSE3:
		sm3 = "SSSE3 assembly"
	default:
		sm3 = "portable Go (no SSSE3)"
	}

	// internal/sm4: without AES-NI the Go cipher; with it, the S-box
	// through AESENCLAST (or GFNI when AVX2 and GFNI are there and
	// DISABLE_GFNI is not 1) on 4 blocks at a time (8 with AVX2). A
	// single block goes through Go unless FORCE_SM4BLOCK_AESNI=1.
	useAVX2 := x.HasAVX2
	useGFNI := useAVX2 && gfni && getenv("DISABLE_GFNI") != "1"
	singleAsm := getenv("FORCE_SM4BLOCK_AESNI") == "1" || cpufeat.SingleBlockAsm()
	var sm4, cbc, gcm string
	if !x.HasAES {
		sm4 = "portable Go (no AES-NI)"
		cbc = sm4
		gcm = "portable Go SM4 and GHASH (crypto/cipher)"
	} else {
		sbox := "AES-NI S-box"
		if useGFNI {
			sbox = "GFNI S-box"
		}
		width := "4 blocks at a time (SSE)"
		if useAVX2 {
			width = "8 blocks at a time (AVX2)"
		}
		single := "portable Go, lookup tables"
		if singleAsm {
			single = "assembly (gmgate switches it on, as FORCE_SM4BLOCK_AESNI=1 does)"
		}
		sm4 = "assembly, " + sbox + ", " + width + "; a single block in " + single
		cbc = "encrypt: gmgate's own (below); decrypt: assembly, " + sbox + ", " + width
		if x.HasPCLMULQDQ {
			gcm = "assembly, " + sbox + " with PCLMULQDQ GHASH"
		} else {
			gcm = "SM4 in assembly, GHASH in Go (no PCLMULQDQ)"
		}
	}
	return []Implementation{{"SM2", sm2}, {"SM3", sm3}, {"SM4", sm4}, {"SM4-CBC", cbc}, {"SM4-GCM", gcm}}
}

func arm64Implementations(getenv func(string) string) []Implementation {
	a := cpu.ARM64
	sm3 := "arm64 assembly"
	if a.HasSM3 && getenv("DISABLE_SM3NI") != "1" {
		sm3 = "SM3 instructions (SM3PARTW/SM3SS1)"
	}
	var sm4, cbc, gcm string
	switch {
	case a.HasSM4 && getenv("DISABLE_SM4NI") != "1":
		sm4 = "SM4 instructions (SM4E)"
	case a.HasAES && cpufeat.SingleBlockAsm():
		sm4 = "assembly, AES S-box (AESE), 4 blocks at a time; a single block in assembly (gmgate switches it on)"
	case a.HasAES:
		sm4 = "assembly, AES S-box (AESE), 4 blocks at a time; a single block in portable Go, lookup tables"
	default:
		sm4 = "portable Go (no AES)"
	}
	cbc = sm4
	if strings.HasPrefix(sm4, "SM4 instructions") {
		cbc = sm4 + ", one block at a time (crypto/cipher CBC)"
	} else if strings.HasPrefix(sm4, "assembly") {
		cbc = "encrypt: gmgate's own (below); decrypt: assembly, AES S-box"
	}
	switch {
	case (a.HasSM4 || a.HasAES) && a.HasPMULL:
		gcm = sm4 + ", PMULL GHASH"
	case a.HasAES:
		gcm = "SM4 in assembly, GHASH in Go (no PMULL)"
	default:
		gcm = "portable Go SM4 and GHASH (crypto/cipher)"
	}
	return []Implementation{{"SM2", "arm64 assembly, precomputed base-point table"}, {"SM3", sm3}, {"SM4", sm4}, {"SM4-CBC", cbc}, {"SM4-GCM", gcm}}
}

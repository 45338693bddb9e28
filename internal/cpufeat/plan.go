package cpufeat

import (
	"strings"
	"sync"
)

// Primitive is an operation whose implementation depends on the CPU.
type Primitive int

// The primitives.
const (
	SM4CBCEncrypt Primitive = iota // TLCP CBC records, serial within a record
	SM4CBCDecrypt                  // TLCP CBC records, parallel within a record
	SM4GCM                         // TLCP GCM records, session ticket sealing
	SM4Block                       // single blocks: CMAC, key-file encryption, key schedules
	SM3Hash                        // handshake hashes, HMAC, record MACs
	SM2Curve                       // signatures, encryption, key agreement
	numPrimitives
)

var primitiveNames = [numPrimitives]string{"sm4-cbc-encrypt", "sm4-cbc-decrypt", "sm4-gcm", "sm4-block", "sm3", "sm2"}

func (p Primitive) String() string { return primitiveNames[p] }

// Primitives lists all primitives in the order Plan prints them.
func Primitives() []Primitive {
	ps := make([]Primitive, numPrimitives)
	for i := range ps {
		ps[i] = Primitive(i)
	}
	return ps
}

// Impl is the implementation chosen for a primitive.
type Impl struct {
	Name string
	// ConstantTime is false when the implementation indexes tables with
	// secret-dependent data (key or plaintext), which a process sharing
	// the CPU's caches can observe.
	ConstantTime bool
}

// CBCKernel is the SM4-CBC encrypter that tlcp/internal/sm4cbc runs.
type CBCKernel int

const (
	// CBCSerial encrypts one block after the other through gmsm's
	// single-block Encrypt; constant-time only where that is.
	CBCSerial CBCKernel = iota
	// CBCLanesGFNI runs four chains in the lanes of one vector register
	// with GFNI and AVX-512.
	CBCLanesGFNI
	// CBCLanesAESNI runs four chains in the lanes of one vector register
	// with AES-NI and AVX (Hygon, x86 without AVX-512 and GFNI).
	CBCLanesAESNI
	// CBCLanesBlocks runs four chains side by side through gmsm's
	// multi-block code, one block of each chain per call: AES-NI, the
	// ARMv8 AES or the ARMv8 SM4 instructions.
	CBCLanesBlocks
)

// GCMKernel is the SM4-GCM that tlcp/internal/sm4gcm runs.
type GCMKernel int

const (
	// GCMGmsm is gmsm's SM4-GCM (crypto/cipher.NewGCM over its SM4).
	GCMGmsm GCMKernel = iota
	// GCMWideGFNI runs sixteen counter blocks at once through GFNI and
	// AVX-512, with GHASH four blocks per VPCLMULQDQ.
	GCMWideGFNI
)

// Plan is what the dispatch chose for one CPU.
type Plan struct {
	CPU   CPU
	Impls [numPrimitives]Impl
	// CBC is the SM4-CBC encrypter.
	CBC CBCKernel
	// GCM is the SM4-GCM implementation.
	GCM GCMKernel
	// SingleBlockAsm is true when gmsm's single-block SM4 is to run its
	// AES-instruction code rather than its lookup tables (see
	// singleblock.go); gmsm's own default is the tables.
	SingleBlockAsm bool
	// PreferGCM is true when SM4-GCM records cost less than SM4-CBC ones
	// on this CPU, so that servers rank the GCM suites first.
	PreferGCM bool
}

// Impl returns the implementation of p.
func (p *Plan) Impl(prim Primitive) Impl { return p.Impls[prim] }

// ConstantTime reports whether every primitive is constant-time.
func (p *Plan) ConstantTime() bool {
	for _, im := range p.Impls {
		if !im.ConstantTime {
			return false
		}
	}
	return true
}

// Warning is the one line gmgate prints when some primitive has no
// constant-time implementation on this CPU, or "" when all have.
func (p *Plan) Warning() string {
	var names []string
	for i, im := range p.Impls {
		if !im.ConstantTime {
			names = append(names, Primitive(i).String())
		}
	}
	if len(names) == 0 {
		return ""
	}
	why := "this CPU has neither AES nor SM4 instructions"
	switch {
	case p.CPU.Purego:
		why = "this is a purego build"
	case p.CPU.Arch == "loong64":
		why = "gmsm has no constant-time single-block SM4 on loong64"
	case p.CPU.Arch != "amd64" && p.CPU.Arch != "arm64":
		why = "gmsm has no SM4 assembly for " + p.CPU.Arch
	case p.CPU.Disabled != 0:
		why = "GMGATE_CPU_DISABLE turned off " + p.CPU.Disabled.String()
	}
	return "SM4 is not constant-time here (" + strings.Join(names, ", ") + " use lookup tables indexed by secret data: " + why + "); a process sharing this CPU's caches may learn keys from timing"
}

// Choose decides the implementations for a CPU. It is the one table of
// the package: everything else reads its result.
func Choose(c CPU) Plan {
	p := Plan{CPU: c}
	f := c.Features
	set := func(prim Primitive, name string, ct bool) { p.Impls[prim] = Impl{name, ct} }
	tables := "gmsm Go, lookup tables"
	asm := !c.Purego && (c.Arch == "amd64" || c.Arch == "arm64")
	switch {
	case asm && c.Arch == "arm64" && f.Has(SM4):
		set(SM4Block, "ARMv8 SM4 instructions (gmsm)", true)
		set(SM4CBCEncrypt, "4 chains side by side, ARMv8 SM4 instructions (gmsm)", true)
		set(SM4CBCDecrypt, "ARMv8 SM4 instructions (gmsm)", true)
		p.CBC = CBCLanesBlocks
		if f.Has(CLMUL) {
			set(SM4GCM, "ARMv8 SM4 instructions, PMULL GHASH (gmsm)", true)
			p.PreferGCM = true
		} else {
			set(SM4GCM, "ARMv8 SM4 instructions, GHASH in Go with tables (gmsm)", false)
		}
	case asm && f.Has(AES):
		inst, mul := "AES-NI", "PCLMULQDQ"
		if c.Arch == "arm64" {
			inst, mul = "ARMv8 AES", "PMULL"
		}
		p.SingleBlockAsm = true
		set(SM4Block, "S-box through "+inst+" (gmsm, one block)", true)
		switch {
		case c.Arch == "amd64" && f.Has(AVX512) && f.Has(GFNI):
			set(SM4CBCEncrypt, "4 chains in one register, GFNI and AVX-512 (gmgate)", true)
			p.CBC = CBCLanesGFNI
		case c.Arch == "amd64" && f.Has(AVX2):
			set(SM4CBCEncrypt, "4 chains in one register, S-box through AES-NI, AVX (gmgate)", true)
			p.CBC = CBCLanesAESNI
		default:
			set(SM4CBCEncrypt, "4 chains side by side, S-box through "+inst+" (gmsm)", true)
			p.CBC = CBCLanesBlocks
		}
		wide := ""
		if c.Arch == "amd64" && f.Has(AVX2) {
			wide = ", AVX2"
		}
		set(SM4CBCDecrypt, "S-box through "+inst+wide+" (gmsm)", true)
		switch {
		case c.Arch == "amd64" && f.Has(AVX512) && f.Has(GFNI) && f.Has(VPCLMUL):
			set(SM4GCM, "64 blocks at once, GFNI and AVX-512, 4-way VPCLMULQDQ GHASH (gmgate)", true)
			p.GCM = GCMWideGFNI
			p.PreferGCM = true
		case f.Has(CLMUL):
			set(SM4GCM, "S-box through "+inst+wide+", "+mul+" GHASH (gmsm)", true)
			p.PreferGCM = true
		default:
			set(SM4GCM, "S-box through "+inst+", GHASH in Go with tables (gmsm)", false)
		}
	default:
		set(SM4Block, tables, false)
		set(SM4CBCEncrypt, tables+", one block at a time", false)
		set(SM4CBCDecrypt, tables, false)
		set(SM4GCM, tables+", Go's generic GCM", false)
		if c.Arch == "loong64" && !c.Purego && f.Has(LASX) {
			// gmsm's LASX code does many blocks at once, but its key
			// schedule and single blocks (GCM's tag mask, CBC
			// encryption) remain table-driven.
			set(SM4CBCDecrypt, "LASX (gmsm), key schedule with tables", false)
			set(SM4GCM, "LASX counter mode (gmsm), key schedule, tag and GHASH with tables", false)
		}
	}
	// SM3 and SM2 have no secret-indexed tables in any of gmsm's
	// implementations.
	switch {
	case c.Purego || (c.Arch != "amd64" && c.Arch != "arm64" && c.Arch != "loong64"):
		set(SM3Hash, "gmsm Go", true)
		set(SM2Curve, "gmsm Go (fiat field arithmetic)", true)
	case c.Arch == "amd64":
		if f.Has(AVX2) {
			set(SM3Hash, "AVX2 (gmsm)", true)
		} else {
			set(SM3Hash, "SSSE3 (gmsm)", true)
		}
		set(SM2Curve, "amd64 assembly (gmsm)", true)
	case c.Arch == "arm64":
		if f.Has(SM3) {
			set(SM3Hash, "ARMv8 SM3 instructions (gmsm)", true)
		} else {
			set(SM3Hash, "arm64 assembly (gmsm)", true)
		}
		set(SM2Curve, "arm64 assembly (gmsm)", true)
	case c.Arch == "loong64":
		if f.Has(LSX) {
			set(SM3Hash, "LSX (gmsm)", true)
		} else {
			set(SM3Hash, "loong64 assembly (gmsm)", true)
		}
		set(SM2Curve, "loong64 assembly with LSX (gmsm)", true)
	}
	return p
}

var (
	currentOnce sync.Once
	current     Plan
)

// init applies the host's plan as soon as any package imports this one,
// before the first SM4 key is used: every package that uses SM4 (tlcp,
// internal/sessionstore, internal/keyenc) imports it.
func init() { Current() }

// Current is the plan for the host CPU. The first call also sets gmsm's
// single-block SM4 to the plan's choice.
func Current() *Plan {
	currentOnce.Do(func() {
		current = Choose(Host())
		if current.SingleBlockAsm {
			SetSingleBlockAsm(true)
		}
	})
	return &current
}

// String renders the plan as gmgate version --cpu prints it.
func (p *Plan) String() string {
	var b strings.Builder
	b.WriteString("cpu: " + p.CPU.Arch)
	if p.CPU.Purego {
		b.WriteString(" (purego build)")
	}
	b.WriteString("\nfeatures: " + p.CPU.Features.String())
	if p.CPU.Disabled != 0 {
		b.WriteString(" (turned off by " + EnvDisable + ": " + p.CPU.Disabled.String() + ")")
	}
	b.WriteString("\n")
	if p.CPU.Disabled != 0 {
		b.WriteString("note: " + EnvDisable + " changes gmgate's own choices (CBC encryption, GCM on AVX-512, single SM4 blocks, suite order); gmsm's multi-block code still follows the CPU (its switches: DISABLE_GFNI, DISABLE_SM4NI, DISABLE_SM3NI)\n")
	}
	for i, im := range p.Impls {
		ct := "constant-time"
		if !im.ConstantTime {
			ct = "NOT constant-time"
		}
		b.WriteString(pad(Primitive(i).String()+":", 17) + im.Name + "; " + ct + "\n")
	}
	return b.String()
}

func pad(s string, n int) string {
	for len(s) < n {
		s += " "
	}
	return s
}

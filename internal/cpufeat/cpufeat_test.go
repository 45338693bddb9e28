package cpufeat

import (
	"strings"
	"testing"
)

func mustSet(t *testing.T, names string) Set {
	t.Helper()
	s, err := ParseSet(names)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChoose runs the dispatch table for the CPUs gmgate is deployed on
// and checks the implementation of each primitive and whether it is
// constant-time.
func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu       CPU
		cbc       CBCKernel
		gcm       GCMKernel
		single    bool
		preferGCM bool
		// notCT lists the primitives that are not constant-time.
		notCT []Primitive
		// names maps a primitive to a word its implementation's name has.
		names map[Primitive]string
	}{
		{
			name: "zen4, ice lake and later", cpu: CPU{Arch: "amd64", Features: mustSet(t, "aes clmul avx2 avx512 gfni vpclmul")},
			cbc: CBCLanesGFNI, gcm: GCMWideGFNI, single: true, preferGCM: true,
			names: map[Primitive]string{SM4CBCEncrypt: "GFNI", SM4GCM: "64 blocks at once, GFNI and AVX-512, 4-way VPCLMULQDQ", SM4Block: "AES-NI"},
		},
		{
			name: "vpclmul without gfni", cpu: CPU{Arch: "amd64", Features: mustSet(t, "aes clmul avx2 avx512 vpclmul")},
			cbc: CBCLanesAESNI, single: true, preferGCM: true,
			names: map[Primitive]string{SM4GCM: "(gmsm)"},
		},
		{
			name: "purego with vpclmul", cpu: CPU{Arch: "amd64", Purego: true, Features: mustSet(t, "aes clmul avx2 avx512 gfni vpclmul")},
			cbc: CBCSerial, notCT: []Primitive{SM4CBCEncrypt, SM4CBCDecrypt, SM4GCM, SM4Block},
			names: map[Primitive]string{SM4GCM: "tables"},
		},
		{
			name: "avx512-gfni", cpu: CPU{Arch: "amd64", Features: mustSet(t, "aes clmul avx2 avx512 gfni")},
			cbc: CBCLanesGFNI, single: true, preferGCM: true,
			names: map[Primitive]string{SM4CBCEncrypt: "GFNI", SM4GCM: "PCLMULQDQ", SM4Block: "AES-NI", SM3Hash: "AVX2"},
		},
		{
			name: "hygon", cpu: CPU{Arch: "amd64", Features: mustSet(t, "aes clmul avx2")},
			cbc: CBCLanesAESNI, single: true, preferGCM: true,
			names: map[Primitive]string{SM4CBCEncrypt: "AES-NI", SM4CBCDecrypt: "AES-NI", SM4GCM: "PCLMULQDQ"},
		},
		{
			name: "westmere", cpu: CPU{Arch: "amd64", Features: mustSet(t, "aes clmul")},
			cbc: CBCLanesBlocks, single: true, preferGCM: true,
			names: map[Primitive]string{SM4CBCEncrypt: "AES-NI", SM3Hash: "SSSE3"},
		},
		{
			name: "x86 without aes", cpu: CPU{Arch: "amd64", Features: mustSet(t, "avx2")},
			cbc: CBCSerial, notCT: []Primitive{SM4CBCEncrypt, SM4CBCDecrypt, SM4GCM, SM4Block},
			names: map[Primitive]string{SM4Block: "tables"},
		},
		{
			name: "kunpeng with sm4", cpu: CPU{Arch: "arm64", Features: mustSet(t, "aes clmul sm3 sm4")},
			cbc: CBCLanesBlocks, preferGCM: true,
			names: map[Primitive]string{SM4Block: "SM4 instructions", SM4GCM: "PMULL", SM3Hash: "SM3 instructions"},
		},
		{
			name: "armv8.0", cpu: CPU{Arch: "arm64", Features: mustSet(t, "aes clmul")},
			cbc: CBCLanesBlocks, single: true, preferGCM: true,
			names: map[Primitive]string{SM4Block: "ARMv8 AES", SM4CBCEncrypt: "ARMv8 AES"},
		},
		{
			name: "loongson", cpu: CPU{Arch: "loong64", Features: mustSet(t, "lsx lasx")},
			cbc: CBCSerial, notCT: []Primitive{SM4CBCEncrypt, SM4CBCDecrypt, SM4GCM, SM4Block},
			names: map[Primitive]string{SM4CBCDecrypt: "LASX", SM3Hash: "LSX"},
		},
		{
			name: "purego", cpu: CPU{Arch: "amd64", Purego: true, Features: mustSet(t, "aes clmul avx2 avx512 gfni")},
			cbc: CBCSerial, notCT: []Primitive{SM4CBCEncrypt, SM4CBCDecrypt, SM4GCM, SM4Block},
			names: map[Primitive]string{SM2Curve: "Go", SM3Hash: "Go"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Choose(tc.cpu)
			if p.GCM != tc.gcm {
				t.Errorf("GCM kernel %d, want %d", p.GCM, tc.gcm)
			}
			if p.CBC != tc.cbc || p.SingleBlockAsm != tc.single || p.PreferGCM != tc.preferGCM {
				t.Errorf("CBC kernel %d, single-block asm %v, prefer GCM %v; want %d, %v, %v", p.CBC, p.SingleBlockAsm, p.PreferGCM, tc.cbc, tc.single, tc.preferGCM)
			}
			for _, prim := range Primitives() {
				want := true
				for _, n := range tc.notCT {
					if n == prim {
						want = false
					}
				}
				if got := p.Impl(prim); got.ConstantTime != want {
					t.Errorf("%s: %q constant-time %v, want %v", prim, got.Name, got.ConstantTime, want)
				}
			}
			for prim, word := range tc.names {
				if !strings.Contains(p.Impl(prim).Name, word) {
					t.Errorf("%s: %q, want it to name %s", prim, p.Impl(prim).Name, word)
				}
			}
			if w := p.Warning(); (w == "") != (len(tc.notCT) == 0) {
				t.Errorf("warning %q with %d primitives not constant-time", w, len(tc.notCT))
			}
		})
	}
}

func TestParseSet(t *testing.T) {
	s, err := ParseSet("AVX512, gfni")
	if err != nil || s != Set(AVX512|GFNI) || s.String() != "avx512 gfni" {
		t.Fatalf("ParseSet: %v %v", s, err)
	}
	if _, err := ParseSet("avx512,sse9"); err == nil || !strings.Contains(err.Error(), "sse9") {
		t.Fatalf("an unknown name gave %v", err)
	}
	if Set(0).String() != "none" {
		t.Fatal(Set(0).String())
	}
}

// TestDisableFromEnvironment checks that GMGATE_CPU_DISABLE turns features
// off and that a bad name is reported, not ignored.
func TestDisableFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env     string
		off     Set
		wantErr bool
	}{
		{"avx512,gfni", Set(AVX512 | GFNI), false},
		{"vpclmul", Set(VPCLMUL), false},
		{"aes sse9", Set(AES), true},
		{"", 0, false},
	} {
		c, err := hostWith(tc.env)
		if c.Disabled != tc.off || c.Features&tc.off != 0 || c.Features != c.Detected&^tc.off || (err != nil) != tc.wantErr {
			t.Errorf("%q: disabled %s, features %s of %s, error %v", tc.env, c.Disabled, c.Features, c.Detected, err)
		}
	}
}

func FuzzParseSet(f *testing.F) {
	for _, s := range []string{"avx512,gfni", "AES", " , ,", "sse9", "aes clmul avx2 avx512 gfni sm3 sm4 lsx lasx vpclmul"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		s, err := ParseSet(list)
		if err != nil {
			return
		}
		// What parses prints as names that parse back to the same set.
		if s != 0 {
			back, err := ParseSet(s.String())
			if err != nil || back != s {
				t.Fatalf("%q → %v → %q → %v, %v", list, s, s.String(), back, err)
			}
		}
	})
}

// TestDisableTurnsOffGCMKernel: naming any feature the SM4-GCM kernel
// needs in GMGATE_CPU_DISABLE gives gmsm's GCM, on a CPU that has them all.
func TestDisableTurnsOffGCMKernel(t *testing.T) {
	full := mustSet(t, "aes clmul avx2 avx512 gfni vpclmul")
	if p := Choose(CPU{Arch: "amd64", Features: full}); p.GCM != GCMWideGFNI {
		t.Fatalf("all features: GCM kernel %d", p.GCM)
	}
	for _, off := range []string{"avx512", "gfni", "vpclmul", "avx512,gfni"} {
		c := CPU{Arch: "amd64", Detected: full, Disabled: mustSet(t, off)}
		c.Features = c.Detected &^ c.Disabled
		p := Choose(c)
		if p.GCM != GCMGmsm || !strings.Contains(p.Impl(SM4GCM).Name, "(gmsm)") {
			t.Errorf("%s off: GCM kernel %d (%s), want gmsm's", off, p.GCM, p.Impl(SM4GCM).Name)
		}
	}
}

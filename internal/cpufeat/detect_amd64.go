package cpufeat

import "golang.org/x/sys/cpu"

func detect() Set {
	var s Set
	add := func(ok bool, f Feature) {
		if ok {
			s |= Set(f)
		}
	}
	add(cpu.X86.HasAES, AES)
	add(cpu.X86.HasPCLMULQDQ, CLMUL)
	add(cpu.X86.HasAVX2, AVX2)
	add(cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL, AVX512)
	add(cpu.X86.HasAVX512GFNI, GFNI)
	add(cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX512BW, VPCLMUL)
	return s
}

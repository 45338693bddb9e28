package cpufeat

import "golang.org/x/sys/cpu"

func detect() Set {
	var s Set
	add := func(ok bool, f Feature) {
		if ok {
			s |= Set(f)
		}
	}
	add(cpu.ARM64.HasAES, AES)
	add(cpu.ARM64.HasPMULL, CLMUL)
	add(cpu.ARM64.HasSM3, SM3)
	add(cpu.ARM64.HasSM4, SM4)
	return s
}

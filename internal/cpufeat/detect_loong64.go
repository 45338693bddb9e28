package cpufeat

import "golang.org/x/sys/cpu"

func detect() Set {
	var s Set
	if cpu.Loong64.HasLSX {
		s |= Set(LSX)
	}
	if cpu.Loong64.HasLASX {
		s |= Set(LASX)
	}
	return s
}

package cpufeat

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Emulation says, when this process runs under user-mode emulation of
// another architecture (qemu-user, box64, Rosetta and the like), what
// gave it away; "" when nothing did. Figures taken under emulation say
// nothing about the CPU the binary is built for.
//
// The signal is /proc/cpuinfo: the emulators pass the host's through, so
// an arm64 or loong64 binary reads an x86 CPU there (and an amd64 binary
// an ARM one). It is Linux only; elsewhere Emulation returns "".
func Emulation() string {
	emulationOnce.Do(func() {
		f, err := os.Open("/proc/cpuinfo")
		if err != nil {
			return
		}
		defer f.Close()
		emulation = emulationFrom(runtime.GOARCH, cpuinfoArch(f))
	})
	return emulation
}

var (
	emulationOnce sync.Once
	emulation     string
)

// archFamily groups GOARCH values by the kind of /proc/cpuinfo their
// kernels write.
func archFamily(goarch string) string {
	switch goarch {
	case "amd64", "386":
		return "x86"
	case "arm64", "arm":
		return "arm"
	case "loong64":
		return "loongarch"
	case "riscv64":
		return "riscv"
	}
	return ""
}

// cpuinfoArch reads /proc/cpuinfo and returns the family of the CPU it
// describes ("" when it cannot tell) and its model name.
type cpuinfoDesc struct{ family, model string }

func cpuinfoArch(f *os.File) cpuinfoDesc {
	var d cpuinfoDesc
	s := bufio.NewScanner(f)
	for n := 0; s.Scan() && n < 200; n++ {
		key, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		switch {
		case key == "vendor_id" && d.family == "":
			d.family = "x86"
		case key == "cpu implementer" && d.family == "":
			d.family = "arm"
		case (key == "cpu family" || key == "model name") && strings.Contains(strings.ToLower(val), "loongson"):
			d.family = "loongarch"
		case key == "isa" && strings.HasPrefix(val, "rv"):
			d.family = "riscv"
		}
		if key == "model name" && d.model == "" {
			d.model = val
		}
	}
	return d
}

func emulationFrom(goarch string, d cpuinfoDesc) string {
	want := archFamily(goarch)
	if d.family == "" || want == "" || d.family == want {
		return ""
	}
	what := d.family
	if d.model != "" {
		what += " (" + d.model + ")"
	}
	return "this " + goarch + " binary runs under emulation: /proc/cpuinfo describes an " + what + " CPU; figures here are the emulator's, not an " + goarch + " CPU's"
}

package cpufeat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func cpuinfoFile(t testing.TB, text string) *os.File {
	path := filepath.Join(t.TempDir(), "cpuinfo")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

const (
	x86Info   = "processor\t: 0\nvendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel name\t: Hygon C86 7285 32-core Processor\nflags\t\t: fpu aes avx2\n"
	armInfo   = "processor\t: 0\nBogoMIPS\t: 200.00\nFeatures\t: fp asimd aes pmull sm3 sm4\nCPU implementer\t: 0x48\nCPU architecture: 8\n"
	loongInfo = "system type\t\t: generic-loongson-machine\n\nprocessor\t\t: 0\npackage\t\t\t: 0\ncore\t\t\t: 0\ncpu family\t\t: Loongson-64bit\nmodel name\t\t: Loongson-3A5000\n"
)

// TestEmulation checks the verdict for each binary on each CPU's
// /proc/cpuinfo: a mismatch is emulation, a match or an unknown format is
// not.
func TestEmulation(t *testing.T) {
	for _, tc := range []struct {
		goarch, info string
		emulated     bool
	}{
		{"amd64", x86Info, false},
		{"arm64", x86Info, true},
		{"loong64", x86Info, true},
		{"arm64", armInfo, false},
		{"amd64", armInfo, true},
		{"loong64", loongInfo, false},
		{"arm64", loongInfo, true},
		{"arm64", "", false},
		{"mips64", x86Info, false},
	} {
		got := emulationFrom(tc.goarch, cpuinfoArch(cpuinfoFile(t, tc.info)))
		if (got != "") != tc.emulated {
			t.Errorf("%s binary, cpuinfo %.20q: %q", tc.goarch, tc.info, got)
		}
		if tc.emulated && !strings.Contains(got, "emulation") {
			t.Errorf("%q does not say emulation", got)
		}
	}
}

func FuzzCPUInfo(f *testing.F) {
	for _, s := range []string{x86Info, armInfo, loongInfo, "", ":::\n\n:", "model name: " + strings.Repeat("x", 5000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d := cpuinfoArch(cpuinfoFile(t, text))
		_ = emulationFrom("arm64", d)
	})
}

package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/cpu"
)

// Machine describes where figures were taken.
type Machine struct {
	CPUModel string `json:"cpu_model"`
	// NumCPU is the machine's online CPUs, however many this process
	// may use (taskset); the reports list those separately.
	NumCPU    int    `json:"num_cpu"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	// GMSMVersion is the version of github.com/emmansun/gmsm built in.
	GMSMVersion string `json:"gmsm_version"`
	// Purego is true when built with the purego tag (no assembly).
	Purego   bool      `json:"purego"`
	Features []Feature `json:"cpu_features"`
	// Dispatch is what gmgate runs for each GM primitive on this CPU
	// (internal/cpufeat), and whether it is constant-time.
	Dispatch []Dispatch `json:"dispatch"`
	// Warnings are what a reader of the figures must know first: that
	// they were taken under emulation, or on a CPU where SM4 has no
	// constant-time path.
	Warnings []string `json:"warnings,omitempty"`
}

// Dispatch is the implementation of one primitive.
type Dispatch struct {
	Primitive      string `json:"primitive"`
	Implementation string `json:"implementation"`
	ConstantTime   bool   `json:"constant_time"`
}

// Feature is one instruction-set extension and whether the CPU (and OS)
// offer it.
type Feature struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
}

// DetectMachine describes this machine.
func DetectMachine() Machine {
	m := Machine{
		CPUModel:    cpuModel(),
		NumCPU:      onlineCPUs(),
		GOOS:        runtime.GOOS,
		GOARCH:      runtime.GOARCH,
		GoVersion:   runtime.Version(),
		GMSMVersion: moduleVersion("github.com/emmansun/gmsm"),
		Purego:      puregoBuild,
		Features:    cpuFeatures(),
	}
	plan := cpufeat.Current()
	for _, p := range cpufeat.Primitives() {
		im := plan.Impl(p)
		m.Dispatch = append(m.Dispatch, Dispatch{p.String(), im.Name, im.ConstantTime})
	}
	m.Warnings = machineWarnings(plan, cpufeat.Emulation())
	return m
}

// machineWarnings are the lines printed above a report's tables.
func machineWarnings(plan *cpufeat.Plan, emulation string) []string {
	var ws []string
	if emulation != "" {
		ws = append(ws, emulation+". Do not publish these figures as that CPU's.")
	}
	if w := plan.Warning(); w != "" {
		ws = append(ws, w)
	}
	return ws
}

// writeWarnings prints the machine's warnings, one a line.
func writeWarnings(w io.Writer, m Machine) {
	for _, s := range m.Warnings {
		fmt.Fprintln(w, "WARNING:", s)
	}
}

// onlineCPUs counts the machine's online CPUs from
// /sys/devices/system/cpu/online ("0-3,6"); runtime.NumCPU, which counts
// only those this process may use, where that cannot be read.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return runtime.NumCPU()
		}
		n += z - a + 1
	}
	return max(n, runtime.NumCPU())
}

// cpuFeatures lists the extensions that Go's crypto and gmsm choose their
// code by, for the architecture this runs on.
func cpuFeatures() []Feature {
	switch runtime.GOARCH {
	case "amd64", "386":
		return []Feature{
			{"AES-NI", cpu.X86.HasAES},
			{"PCLMULQDQ", cpu.X86.HasPCLMULQDQ},
			{"SSSE3", cpu.X86.HasSSSE3},
			{"AVX", cpu.X86.HasAVX},
			{"AVX2", cpu.X86.HasAVX2},
			{"AVX-512F", cpu.X86.HasAVX512F},
			{"BMI2", cpu.X86.HasBMI2},
			{"ADX", cpu.X86.HasADX},
			// x/sys/cpu reports neither SHA-NI nor GFNI outside AVX-512;
			// gmsm reads the GFNI bit itself, as cpuid does here.
			{"SHA-NI", cpuid.CPU.Supports(cpuid.SHA)},
			{"GFNI", cpuid.CPU.Supports(cpuid.GFNI)},
			{"VAES", cpuid.CPU.Supports(cpuid.VAES)},
			{"VPCLMULQDQ", cpuid.CPU.Supports(cpuid.VPCLMULQDQ)},
		}
	case "arm64":
		return []Feature{
			{"ASIMD", cpu.ARM64.HasASIMD},
			{"AES", cpu.ARM64.HasAES},
			{"PMULL", cpu.ARM64.HasPMULL},
			{"SHA2", cpu.ARM64.HasSHA2},
			{"SM3", cpu.ARM64.HasSM3},
			{"SM4", cpu.ARM64.HasSM4},
		}
	}
	return nil
}

func hasFeature(fs []Feature, name string) bool {
	for _, f := range fs {
		if f.Name == name {
			return f.Present
		}
	}
	return false
}

// cpuModel names the processor: the CPUID brand string (what go test
// prints), with the kernel's model name beside it when that differs.
func cpuModel() string {
	brand := strings.TrimSpace(cpuid.CPU.BrandName)
	var kernel string
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				kernel = strings.TrimSpace(v)
				break
			}
		}
	}
	switch {
	case brand != "" && kernel != "" && kernel != brand:
		return brand + " (" + kernel + ")"
	case brand != "":
		return brand
	case kernel != "":
		return kernel
	}
	return "unknown " + runtime.GOARCH
}

// moduleVersion is the version of a module built into this binary, or
// "unknown".
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version + " (replaced)"
			}
			return d.Version
		}
	}
	return "unknown"
}

package tlcp

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/tlcp/internal/sm4gcm"
)

// Feature sets of CPUs gmgate is deployed on, for tests that take their
// paths on this machine.
var (
	// cpuAVX512GFNI is a recent Intel or AMD server (Ice Lake, Zen 4).
	cpuAVX512GFNI = cpufeat.CPU{Arch: "amd64", Features: cpuSet("aes clmul avx2 avx512 gfni")}
	// cpuAVX512VPCLMUL is the same with VPCLMULQDQ on 512-bit registers
	// (Ice Lake, Zen 4 and later: all that have GFNI with AVX-512).
	cpuAVX512VPCLMUL = cpufeat.CPU{Arch: "amd64", Features: cpuSet("aes clmul avx2 avx512 gfni vpclmul")}
	// cpuHygon is Hygon (Zen 1) or any x86 server without AVX-512 and
	// GFNI: AES-NI, PCLMULQDQ, AVX2.
	cpuHygon = cpufeat.CPU{Arch: "amd64", Features: cpuSet("aes clmul avx2")}
	// cpuNoAES is an x86 CPU without AES-NI (or with it turned off).
	cpuNoAES = cpufeat.CPU{Arch: "amd64", Features: cpuSet("avx2")}
	// cpuKunpengSM4 is an ARMv8.2 core with the SM3/SM4 instructions.
	cpuKunpengSM4 = cpufeat.CPU{Arch: "arm64", Features: cpuSet("aes clmul sm3 sm4")}
	// cpuARMv80 is an ARMv8.0 core with the crypto extension (Cortex-A72,
	// Kunpeng 916, Phytium FT-2000+).
	cpuARMv80 = cpufeat.CPU{Arch: "arm64", Features: cpuSet("aes clmul")}
	// cpuLoongson is a Loongson 3A5000 or later.
	cpuLoongson = cpufeat.CPU{Arch: "loong64", Features: cpuSet("lsx lasx")}
)

func cpuSet(names string) cpufeat.Set {
	s, err := cpufeat.ParseSet(names)
	if err != nil {
		panic(err)
	}
	return s
}

// withCPU makes record protection follow the plan of c until the test
// ends, and gmsm's single-block SM4 the plan's choice.
func withCPU(t testing.TB, c cpufeat.CPU) *cpufeat.Plan {
	t.Helper()
	plan := cpufeat.Choose(c)
	old := cpuPlan
	cpuPlan = func() *cpufeat.Plan { return &plan }
	was := cpufeat.SetSingleBlockAsm(plan.SingleBlockAsm)
	t.Cleanup(func() {
		cpuPlan = old
		cpufeat.SetSingleBlockAsm(was)
	})
	return &plan
}

// TestPreferredCipherSuites checks the server's default order on each
// kind of CPU: GCM first where it runs on AES or SM4 instructions with
// carry-less multiplication, CBC first where it would not.
func TestPreferredCipherSuites(t *testing.T) {
	gcmFirst := []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3}
	cbcFirst := []uint16{ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3}
	for _, tc := range []struct {
		name string
		cpu  cpufeat.CPU
		want []uint16
	}{
		{"avx512-gfni", cpuAVX512GFNI, gcmFirst},
		{"hygon", cpuHygon, gcmFirst},
		{"x86 without clmul", cpufeat.CPU{Arch: "amd64", Features: cpuSet("aes avx2")}, cbcFirst},
		{"no aes", cpuNoAES, cbcFirst},
		{"kunpeng sm4", cpuKunpengSM4, gcmFirst},
		{"armv8.0", cpuARMv80, gcmFirst},
		{"loongson", cpuLoongson, cbcFirst},
		{"purego", cpufeat.CPU{Arch: "amd64", Purego: true, Features: cpuAVX512GFNI.Features}, cbcFirst},
	} {
		plan := cpufeat.Choose(tc.cpu)
		if got := PreferredCipherSuites(&plan); !equalSuites(got, tc.want) {
			t.Errorf("%s: order %s, want %s", tc.name, suiteNames(got), suiteNames(tc.want))
		}
	}
	host := cpufeat.Current()
	if !equalSuites(DefaultCipherSuites, PreferredCipherSuites(host)) {
		t.Errorf("DefaultCipherSuites %s, but this CPU prefers %s", suiteNames(DefaultCipherSuites), suiteNames(PreferredCipherSuites(host)))
	}
}

func equalSuites(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func suiteNames(ids []uint16) []string {
	var names []string
	for _, id := range ids {
		names = append(names, CipherSuiteName(id))
	}
	return names
}

// TestServerPrefersFastestSuite runs handshakes in which the client offers
// GCM before CBC: a server with the default order picks what is fastest
// on the CPU it believes it has, a server with an explicit order keeps it.
func TestServerPrefersFastestSuite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cpu      cpufeat.CPU
		explicit []uint16
		want     uint16
	}{
		{"hygon default", cpuHygon, nil, ECC_SM4_GCM_SM3},
		{"loongson default", cpuLoongson, nil, ECC_SM4_CBC_SM3},
		{"loongson explicit", cpuLoongson, []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3}, ECC_SM4_GCM_SM3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := cpufeat.Choose(tc.cpu)
			ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
			ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3}
			scfg.CipherSuites = tc.explicit
			if tc.explicit == nil {
				// What the server does with Config.CipherSuites nil on
				// that CPU: DefaultCipherSuites is computed once, at start.
				scfg.CipherSuites = PreferredCipherSuites(&plan)
			}
			client, _, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			if got := client.ConnectionState().CipherSuite; got != tc.want {
				t.Fatalf("negotiated %s, want %s", CipherSuiteName(got), CipherSuiteName(tc.want))
			}
		})
	}
}

// TestCBCKernelPerCPU checks which SM4-CBC encrypter CBC records get on
// each kind of CPU, and that records sealed by it open. Kernels that this
// machine cannot run are checked as a choice only.
func TestCBCKernelPerCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpu  cpufeat.CPU
		want cpufeat.CBCKernel
		ct   bool
	}{
		{"avx512-gfni", cpuAVX512GFNI, cpufeat.CBCLanesGFNI, true},
		{"hygon", cpuHygon, cpufeat.CBCLanesAESNI, true},
		{"x86 without avx2", cpufeat.CPU{Arch: "amd64", Features: cpuSet("aes clmul")}, cpufeat.CBCLanesBlocks, true},
		{"no aes", cpuNoAES, cpufeat.CBCSerial, false},
		{"kunpeng sm4", cpuKunpengSM4, cpufeat.CBCLanesBlocks, true},
		{"armv8.0", cpuARMv80, cpufeat.CBCLanesBlocks, true},
		{"loongson", cpuLoongson, cpufeat.CBCSerial, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := cpufeat.Choose(tc.cpu)
			if plan.CBC != tc.want || plan.Impl(cpufeat.SM4CBCEncrypt).ConstantTime != tc.ct {
				t.Fatalf("CBC kernel %d (%s), want %d (constant-time %v)", plan.CBC, plan.Impl(cpufeat.SM4CBCEncrypt).Name, tc.want, tc.ct)
			}
			host := cpufeat.Current().CPU
			if tc.cpu.Arch != host.Arch || !host.Features.Has(cpufeat.Feature(tc.cpu.Features)) || host.Purego {
				t.Skipf("this machine (%s: %s) cannot run it", host.Arch, host.Features)
			}
			withCPU(t, tc.cpu)
			ccfg, scfg := suiteConfigs(t, ECC_SM4_CBC_SM3, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			if k := client.out.cipher.(*cbcRecord).enc.Kernel(); k != tc.want {
				t.Fatalf("records sealed with kernel %d, want %d", k, tc.want)
			}
			msg := make([]byte, 70000)
			rand.Read(msg)
			checkTransfer(t, client, server, msg)
		})
	}
}

// TestGCMKernelPerCPU checks which SM4-GCM GCM records get on each kind of
// CPU, and that records sealed by it open, on this machine wherever it
// can run the kernel.
func TestGCMKernelPerCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpu  cpufeat.CPU
		want cpufeat.GCMKernel
	}{
		{"avx512-gfni-vpclmul", cpuAVX512VPCLMUL, cpufeat.GCMWideGFNI},
		{"avx512-gfni", cpuAVX512GFNI, cpufeat.GCMGmsm},
		{"hygon", cpuHygon, cpufeat.GCMGmsm},
		{"kunpeng sm4", cpuKunpengSM4, cpufeat.GCMGmsm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := cpufeat.Choose(tc.cpu)
			if plan.GCM != tc.want || !plan.Impl(cpufeat.SM4GCM).ConstantTime {
				t.Fatalf("GCM kernel %d (%s), want %d", plan.GCM, plan.Impl(cpufeat.SM4GCM).Name, tc.want)
			}
			host := cpufeat.Current().CPU
			if tc.cpu.Arch != host.Arch || !host.Features.Has(cpufeat.Feature(tc.cpu.Features)) || host.Purego {
				t.Skipf("this machine (%s: %s) cannot run it", host.Arch, host.Features)
			}
			withCPU(t, tc.cpu)
			ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			for _, c := range []*Conn{client, server} {
				if k := sm4gcm.KernelOf(c.out.cipher.(*gcmRecord).aead); k != tc.want {
					t.Fatalf("records sealed with kernel %d, want %d", k, tc.want)
				}
			}
			msg := make([]byte, 70000)
			rand.Read(msg)
			checkTransfer(t, client, server, msg)
		})
	}
}

// checkTransfer sends msg each way between a and b and checks it arrives.
func checkTransfer(t *testing.T, a, b *Conn, msg []byte) {
	t.Helper()
	for _, dir := range [][2]*Conn{{a, b}, {b, a}} {
		w, r := dir[0], dir[1]
		errc := make(chan error, 1)
		go func() {
			_, err := w.Write(msg)
			errc <- err
		}()
		got := make([]byte, len(msg))
		r.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatal("the data read differs from the data written")
		}
	}
}

// BenchmarkRecordCBCPaths is BenchmarkRecord's CBC/write/64KiB (a bulk
// write whose four records are encrypted side by side where the CPU
// allows) on the paths of several CPUs, in one run so that a busy machine
// slows them alike: the GFNI kernel (AVX-512 servers), the AES-NI lanes
// (Hygon, x86 without AVX-512), and one block at a time through gmsm's
// lookup tables (what every CPU without GFNI ran before). Compare
// MB/cpu-s.
func BenchmarkRecordCBCPaths(b *testing.B) {
	kb := make([]byte, 128)
	rand.Read(kb)
	payload := make([]byte, 64<<10)
	suite := cipherSuiteByID(ECC_SM4_CBC_SM3)
	for _, tc := range []struct {
		name   string
		cpu    cpufeat.CPU
		tables bool
	}{
		{"avx512-gfni", cpuAVX512GFNI, false},
		{"hygon-aesni", cpuHygon, false},
		{"tables", cpuNoAES, true},
	} {
		b.Run(tc.name+"/write/64KiB", func(b *testing.B) {
			host := cpufeat.Current().CPU
			if tc.cpu.Arch != host.Arch || !host.Features.Has(cpufeat.Feature(tc.cpu.Features)) {
				b.Skipf("this machine (%s: %s) cannot run it", host.Arch, host.Features)
			}
			withCPU(b, tc.cpu)
			_, w, _ := suite.newCiphers(kb, true)
			c := discardingConn(w)
			benchBytes(b, len(payload), func(int) error {
				_, err := c.Write(payload)
				return err
			})
		})
	}
}

// TestNoTableSM4 runs every suite, full and resumed handshakes and bulk
// data both ways, on this CPU's plan and (on amd64) on the plan of a CPU
// without AVX-512 and GFNI, in a build that counts gmsm's table-driven SM4
// blocks, and checks that none was computed where the plan promises
// constant time.
func TestNoTableSM4(t *testing.T) {
	if !cpufeat.Tracing {
		t.Skip(cpufeat.TraceSkip)
	}
	host := cpufeat.Current()
	plans := map[string]cpufeat.CPU{"host": host.CPU}
	if host.CPU.Arch == "amd64" && host.CPU.Features.Has(cpufeat.Feature(cpuHygon.Features)) {
		plans["hygon"] = cpuHygon
	}
	for name, c := range plans {
		t.Run(name, func(t *testing.T) {
			plan := withCPU(t, c)
			if !plan.ConstantTime() {
				t.Skipf("no constant-time SM4 on this CPU: %s", plan.Warning())
			}
			msg := make([]byte, 70000)
			rand.Read(msg)
			for _, suite := range allSuites {
				ccfg, scfg := suiteConfigs(t, suite, false)
				ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
				before := cpufeat.TableCalls()
				for _, resumed := range []bool{false, true} {
					client, server, cerr, serr := handshakePair(t, ccfg, scfg)
					if cerr != nil || serr != nil {
						t.Fatal(cerr, serr)
					}
					if client.ConnectionState().DidResume != resumed {
						t.Fatalf("%s: resumed %v, want %v", CipherSuiteName(suite), !resumed, resumed)
					}
					checkTransfer(t, client, server, msg)
				}
				if n := cpufeat.TableCalls() - before; n != 0 {
					t.Errorf("%s: %d SM4 blocks or key schedules with lookup tables", CipherSuiteName(suite), n)
				}
			}
		})
	}
}

package bench

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"math"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/sys/cpu"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/tlcp"
)

func TestRunCrypto(t *testing.T) {
	// A key through accel's file backend, as --key gives it.
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := pair.Write(t.TempDir(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}

	sizes := []int{16, 1024}
	rep, err := RunCrypto(context.Background(), CryptoOptions{
		Duration: 3 * time.Millisecond, Warmup: time.Millisecond, Sizes: sizes, CPU: -1,
		Keys: []string{"file:" + files.EncKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ group, alg, op string }
	seen := map[key]int{}
	for _, r := range rep.Results {
		if r.Iterations <= 0 || r.Seconds <= 0 || r.OpsPerSec <= 0 || r.NsPerOp <= 0 {
			t.Errorf("%+v: figures must be positive", r)
		}
		if !near(r.OpsPerSec, float64(r.Iterations)/r.Seconds) || !near(r.NsPerOp*r.OpsPerSec, 1e9) {
			t.Errorf("%+v: ops/s, ns/op and iterations disagree", r)
		}
		if r.Size > 0 && !near(r.MBPerSec, r.OpsPerSec*float64(r.Size)/1e6) || r.Size == 0 && r.MBPerSec != 0 {
			t.Errorf("%+v: MB/s is not ops/s times size", r)
		}
		if r.CPUShare < 0 || (runtime.GOOS == "linux" && r.CPUShare == 0) {
			t.Errorf("%+v: CPU share", r)
		}
		// Unknown (-1) when the loop was shorter than the kernel's tick.
		if r.OthersBusy != -1 && (r.OthersBusy < 0 || r.OthersBusy > 1) {
			t.Errorf("%+v: other CPUs' busy share", r)
		}
		seen[key{r.Group, r.Algorithm, r.Operation}]++
	}
	want := map[key]int{
		{GroupPublicKey, "SM2", "sign"}: 1, {GroupPublicKey, "SM2", "verify"}: 1,
		{GroupPublicKey, "ECDSA-P256", "sign"}: 1, {GroupPublicKey, "ECDSA-P256", "verify"}: 1,
		{GroupPublicKey, "RSA-2048", "sign"}: 1, {GroupPublicKey, "RSA-2048", "verify"}: 1,
		{GroupPublicKey, "X25519", "key agreement"}: 1,
		{GroupSM2PKE, "SM2", "encrypt"}:             len(sizes), {GroupSM2PKE, "SM2", "decrypt"}: len(sizes),
		{GroupThroughput, "SM3", "hash"}: len(sizes), {GroupThroughput, "SHA-256", "hash"}: len(sizes),
		{GroupThroughput, "SM4-ECB", "encrypt"}: len(sizes), {GroupThroughput, "SM4-CBC", "encrypt"}: len(sizes),
		{GroupThroughput, "SM4-CBC", "decrypt"}: len(sizes), {GroupThroughput, "SM4-GCM", "seal"}: len(sizes),
		{GroupThroughput, "AES-128-GCM", "seal"}: len(sizes),
		{GroupBackend, "SM2", "sign (TLCP)"}:     2, {GroupBackend, "SM2", "decrypt (TLCP, 48 B)"}: 2,
	}
	for k, n := range want {
		if seen[k] != n {
			t.Errorf("%v measured %d times, want %d", k, seen[k], n)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("measured %v", seen)
	}
	if len(rep.Implementations) != 5 || rep.Machine.GMSMVersion == "" || rep.Machine.NumCPU <= 0 {
		t.Errorf("machine %+v, implementations %+v", rep.Machine, rep.Implementations)
	}
	// gmsm has SM2 assembly for each of the release targets.
	switch runtime.GOARCH {
	case "amd64", "arm64", "loong64":
		if !strings.Contains(rep.Implementations[0].Code, runtime.GOARCH+" assembly") && !rep.Machine.Purego {
			t.Errorf("SM2 implementation %q", rep.Implementations[0].Code)
		}
	}

	doc, _ := decodeReport(t, rep, CryptoSchema, "machine", "gm_implementations", "pinned_cpu", "duration_seconds", "results", "load_average")
	m := doc["machine"].(map[string]any)
	if fs, ok := m["cpu_features"].([]any); runtime.GOARCH == "amd64" && (!ok || len(fs) == 0) {
		t.Errorf("no CPU features in %v", m)
	}
	for _, r := range doc["results"].([]any) {
		res := r.(map[string]any)
		for _, k := range []string{"iterations", "seconds", "ns_per_op", "ops_per_sec", "mb_per_sec", "size", "cpu_share", "others_busy"} {
			if _, ok := res[k].(float64); !ok {
				t.Errorf("result %v: %q is not a number", res, k)
			}
		}
	}

	var table bytes.Buffer
	if err := (Output{}).Write(&table, rep); err != nil {
		t.Fatal(err)
	}
	// The CPU features are read on x86 and arm64 only.
	features := "CPU features present"
	switch runtime.GOARCH {
	case "amd64", "386", "arm64":
	default:
		features = "CPU features: not inspected on this architecture"
	}
	for _, want := range []string{features, "GM implementations", "SM4-GCM", "Public-key operations", "SM2 encryption by message size", "1 KiB", "Server private-key operations through accel", "software file:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	checkCharts(t, rep)
}

func TestRunCryptoOptions(t *testing.T) {
	rep, err := RunCrypto(context.Background(), CryptoOptions{Duration: 2 * time.Millisecond, Warmup: time.Millisecond, Sizes: []int{32}, CPU: -1, Only: []string{"sm3", "SHA"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Algorithm != "SM3" && r.Algorithm != "SHA-256" {
			t.Errorf("--only kept %s", r.Algorithm)
		}
	}
	if len(rep.Results) != 2 {
		t.Errorf("%d results", len(rep.Results))
	}

	bad := []struct {
		opts CryptoOptions
		want string
	}{
		{CryptoOptions{Sizes: []int{15}, CPU: -1}, "multiples of 16"},
		{CryptoOptions{Retries: -1, CPU: -1}, "retries"},
		{CryptoOptions{Warmup: -time.Millisecond, CPU: -1}, "negative"},
		{CryptoOptions{CPU: 1 << 20}, "not among the CPUs"},
		{CryptoOptions{CPU: -1, Only: []string{"md5"}}, "no figure"},
		{CryptoOptions{CPU: -1, Keys: []string{"nosuch:thing"}}, "unknown scheme"},
		{CryptoOptions{CPU: -1, Keys: []string{filepath.Join(t.TempDir(), "missing.key")}}, "missing.key"},
	}
	for _, b := range bad {
		b.opts.Duration = time.Millisecond
		if _, err := RunCrypto(context.Background(), b.opts); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: error %v, want %q", b.opts, err, b.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunCrypto(ctx, CryptoOptions{CPU: -1, Duration: time.Millisecond}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

func TestMeasure(t *testing.T) {
	var total int64
	s, err := measure(func(n int64) error {
		total += n
		deadline := time.Now().Add(time.Duration(n) * 20 * time.Microsecond)
		for time.Now().Before(deadline) {
		}
		return nil
	}, 20*time.Millisecond, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if s.Iterations <= 0 || s.Iterations >= total || s.Elapsed < 18*time.Millisecond {
		t.Errorf("sample %+v after %d iterations in all", s, total)
	}
	if got := s.NsPerOp(); got < 20e3 {
		t.Errorf("%g ns/op for a 20µs operation", got)
	}
	boom := errors.New("boom")
	calls := 0
	if _, err := measure(func(n int64) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	}, time.Second, time.Second); !errors.Is(err, boom) {
		t.Errorf("error %v", err)
	}
	if _, err := measure(func(int64) error { return nil }, 0, 0); err == nil {
		t.Error("a zero duration was accepted")
	}
	if (Sample{}).OpsPerSec() != 0 || (Sample{}).NsPerOp() != 0 || (Sample{}).CPUShare() != 0 {
		t.Error("an empty sample has figures")
	}
}

func TestGMImplementations(t *testing.T) {
	env := func(string) string { return "" }
	for _, im := range gmImplementations("amd64", true, env) {
		if !strings.Contains(im.Code, "purego") {
			t.Errorf("purego: %+v", im)
		}
	}
	riscv := gmImplementations("riscv64", false, env)
	if !strings.Contains(riscv[0].Code, "riscv64 assembly") || !strings.Contains(riscv[2].Code, "portable Go") {
		t.Errorf("riscv64: %+v", riscv)
	}
	if runtime.GOARCH == "amd64" {
		gfniOff := func(k string) string {
			if k == "DISABLE_GFNI" {
				return "1"
			}
			return ""
		}
		for _, im := range gmImplementations("amd64", false, gfniOff) {
			if strings.Contains(im.Code, "GFNI") {
				t.Errorf("DISABLE_GFNI=1 still reports GFNI: %+v", im)
			}
		}
	}
	if runtime.GOARCH == "arm64" {
		// SM4 on the SM4 instructions where the core has them (qemu -cpu
		// max), else on the AES instructions (an ARMv8.0 core with the
		// crypto extension, qemu -cpu cortex-a72), else in Go.
		want := "portable Go (no AES)"
		switch {
		case cpu.ARM64.HasSM4:
			want = "SM4 instructions (SM4E)"
		case cpu.ARM64.HasAES:
			want = "assembly, AES S-box (AESE)"
		}
		if got := gmImplementations("arm64", false, env)[2].Code; !strings.HasPrefix(got, want) {
			t.Errorf("arm64 SM4 with SM4 %v, AES %v: %q, want %q", cpu.ARM64.HasSM4, cpu.ARM64.HasAES, got, want)
		}
		sm4Off := func(k string) string {
			if k == "DISABLE_SM4NI" {
				return "1"
			}
			return ""
		}
		for _, im := range gmImplementations("arm64", false, sm4Off) {
			if strings.Contains(im.Code, "SM4 instructions") {
				t.Errorf("DISABLE_SM4NI=1 still reports the SM4 instructions: %+v", im)
			}
		}
	}
}

func TestErrorKind(t *testing.T) {
	if k := errorKind("connect", errors.New("dial tcp 10.1.2.3:443: something odd")); k != "connect: other: dial tcp N: something odd" {
		t.Errorf("kind %q", k)
	}
	if k := errorKind("handshake", context.DeadlineExceeded); k != "handshake: timeout" {
		t.Errorf("kind %q", k)
	}
	if k := errorKind("handshake", &net.OpError{Op: "remote error", Err: errors.New("tls: internal error")}); k != "handshake: alert from server: internal error" {
		t.Errorf("kind %q", k)
	}
	if k := errorKind("handshake", &tlcp.AlertError{Alert: tlcp.AlertHandshakeFailure, Remote: true}); k != "handshake: alert from server: handshake failure" {
		t.Errorf("kind %q", k)
	}
}

func TestOthersBusy(t *testing.T) {
	before := map[int]cpuTimes{0: {busy: 10, total: 100}, 1: {busy: 0, total: 100}, 2: {busy: 5, total: 100}}
	after := map[int]cpuTimes{0: {busy: 110, total: 200}, 1: {busy: 50, total: 200}, 2: {busy: 5, total: 200}}
	if got := othersBusy(before, after, 0); got != 0.25 {
		t.Errorf("others busy %g, want 0.25", got)
	}
	if got := othersBusy(before, after, 1); got != 0.5 {
		t.Errorf("others busy %g, want 0.5", got)
	}
	if got := othersBusy(nil, after, 0); got != -1 {
		t.Errorf("unknown gave %g", got)
	}
	if runtime.GOOS == "linux" && len(readCPUTimes()) != runtime.NumCPU() && len(readCPUTimes()) == 0 {
		t.Error("/proc/stat gave no CPU")
	}
}

// refusingBackend opens in-memory SM2 keys that sign but refuse to
// decrypt, as a card's signing key does.
type refusingBackend struct{}

type refusingKey struct{ *sm2.PrivateKey }

func (refusingKey) Backend() string { return "refusing" }
func (refusingKey) Close() error    { return nil }
func (refusingKey) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("this key may not decrypt")
}

func (refusingBackend) Open(context.Context, *accel.Ref) (accel.Key, error) {
	k, err := sm2.GenerateKey(rand.Reader)
	return refusingKey{k}, err
}

func init() { accel.Register("benchtest-refusing", refusingBackend{}) }

func TestRunCryptoBackendNotes(t *testing.T) {
	rep, err := RunCrypto(context.Background(), CryptoOptions{
		Duration: 2 * time.Millisecond, Warmup: time.Millisecond, CPU: -1, Only: []string{"sm2"}, Sizes: []int{16},
		Keys: []string{"benchtest-refusing:card"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var signed bool
	for _, r := range rep.Results {
		if r.Backend == "refusing benchtest-refusing:card" {
			if r.Operation != "sign (TLCP)" {
				t.Errorf("figure of an operation the key refuses: %+v", r)
			}
			signed = true
		}
	}
	if !signed || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "this key may not decrypt") {
		t.Errorf("signed %v, notes %q", signed, rep.Notes)
	}
	var table bytes.Buffer
	WriteCryptoTable(&table, rep)
	if !strings.Contains(table.String(), "note: refusing benchtest-refusing:card: SM2 decrypt (TLCP, 48 B) left out") {
		t.Errorf("table lacks the note:\n%s", table.String())
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.5: 2, 4: 5, 5866: 10000, 930: 1000, 2400: 5000} {
		if got := niceStep(raw); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceStep(%g) = %g, want %g", raw, got, want)
		}
	}
}

// TestMachineWarnings checks the lines above a report's tables: one for
// emulation, one for SM4 without a constant-time path, none otherwise.
func TestMachineWarnings(t *testing.T) {
	ct := cpufeat.Choose(cpufeat.CPU{Arch: "amd64", Features: 0xffff})
	tables := cpufeat.Choose(cpufeat.CPU{Arch: "loong64"})
	if ws := machineWarnings(&ct, ""); len(ws) != 0 {
		t.Errorf("warnings on a constant-time CPU, natively: %q", ws)
	}
	ws := machineWarnings(&tables, "this loong64 binary runs under emulation: /proc/cpuinfo describes an x86 CPU")
	if len(ws) != 2 || !strings.Contains(ws[0], "emulation") || !strings.Contains(ws[1], "not constant-time") {
		t.Errorf("warnings under emulation without constant-time SM4: %q", ws)
	}
	var b strings.Builder
	writeWarnings(&b, Machine{Warnings: ws})
	if strings.Count(b.String(), "WARNING:") != 2 {
		t.Errorf("printed %q", b.String())
	}
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/tlcp"
)

// BenchmarkReplicaResumption measures what one TLCP handshake costs a
// gmgate serve replica in CPU, for each key exchange (sub-benchmarks ECC:
// ECC_SM4_GCM_SM3 on a listener without client certificates, and ECDHE:
// ECDHE_SM4_GCM_SM3 on one that requires and verifies them, as ECDHE
// suites need the client's encryption certificate): resumed from its local
// cache, resumed from a session another replica made (a Redis hit: a
// lookup, opening the sealed session, parsing it), and a full handshake.
// Each iteration is one round of the three, in turn, so that the machine's
// other load falls on all three alike; the figures are handshakes per
// CPU-second of the replica (the run time of its threads, from
// /proc/PID/task/*/schedstat), medians of the rounds, with the spread
// (min-max) in the log, and the costs as shares of a full handshake's:
// redis-cost/full (a resumption from Redis), local-cost/full, and
// redis-extra/full (what the lookup adds).
//
// As in gmgate bench handshake, the measured replica runs alone on CPU 0
// (GOMAXPROCS 1) and everything else (the load, replica a, Redis) on the
// other CPUs, so that the load's own CPU is not counted in the replica's
// and does not slow it down; GMGATE_BENCH_PIN=0 leaves the scheduler to
// place everything (as a busy host would).
//
//	go test -run '^$' -bench ReplicaResumption -benchtime 9x ./cmd/gmgate/
//
// GMGATE_BENCH_BASELINE=/path/to/gmgate measures another build beside this
// one, with replicas of its own on the same Redis (under another key
// prefix), interleaved in every round in alternating order; its figures
// are reported with a "base-" prefix. GMGATE_BENCH_PROFILE=DIR writes, after
// the rounds, a CPU profile of the measured replica of each build under
// each load to DIR (SUITE-BUILD-LOAD.pprof, from admin.pprof).
func BenchmarkReplicaResumption(b *testing.B) {
	for _, s := range []struct {
		name, listener string
		suite          uint16
	}{
		{"ECC", "ecc", tlcp.ECC_SM4_GCM_SM3},
		{"ECDHE", "ecdhe", tlcp.ECDHE_SM4_GCM_SM3},
	} {
		b.Run(s.name, func(b *testing.B) { benchReplicaResumption(b, s.name, s.listener, s.suite) })
	}
}

func benchReplicaResumption(b *testing.B, suiteName, listener string, suite uint16) {
	const (
		resumedPerRound = 1500
		fullPerRound    = 400
		workers         = 32
	)
	pinB := pinReplicaB(b)
	rs := testredis.Start(b)
	dir := b.TempDir()
	p := newReplicaPKI(b, dir)
	up := namedUpstream(b, "app")
	profileDir := os.Getenv("GMGATE_BENCH_PROFILE")
	builds := []*replicaBuild{{name: "this", command: gmgateCommand}}
	if base := os.Getenv("GMGATE_BENCH_BASELINE"); base != "" {
		builds = append(builds, &replicaBuild{name: "base", prefix: "base:", command: func(args ...string) *exec.Cmd {
			return exec.Command(base, args...)
		}})
	}
	for _, rb := range builds {
		cfg := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.files.CACert)
		if rb.prefix != "" {
			cfg = strings.Replace(cfg, "timeout: 2s}", "timeout: 2s, key_prefix: "+strconv.Quote(rb.prefix)+"}", 1)
		}
		if profileDir != "" {
			cfg = strings.Replace(cfg, `admin: {listen: "127.0.0.1:0"}`, `admin: {listen: "127.0.0.1:0", pprof: true}`, 1)
		}
		rb.start(b, dir, cfg, pinB, listener)
	}

	handshake := func(addr string, cache tlcp.ClientSessionCache, wantResumed bool) {
		st, err := tlcpHandshake(p, addr, suite, cache)
		if err != nil {
			b.Fatal(err)
		}
		if st.DidResume != wantResumed {
			b.Fatalf("%s: resumed %v, want %v", addr, st.DidResume, wantResumed)
		}
	}
	// parallel runs n handshakes over the workers.
	parallel := func(n int, one func(i int)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					one(i)
				}
			}()
		}
		wg.Wait()
	}
	perCPUSecond := func(rb *replicaBuild, n int, run func()) float64 {
		before := rb.cpu(b)
		run()
		used := rb.cpu(b) - before
		if used <= 0 {
			b.Fatalf("replica b of %s used no measurable CPU for %d handshakes", rb.name, n)
		}
		return float64(n) / used
	}
	// sessionsFromA makes n sessions on replica a, and waits until a
	// has written them to Redis.
	sessionsFromA := func(rb *replicaBuild, n int) []tlcp.ClientSessionCache {
		written := rb.written(b)
		caches := make([]tlcp.ClientSessionCache, n)
		parallel(n, func(i int) {
			caches[i] = tlcp.NewLRUClientSessionCache(1, 0)
			handshake(rb.addrA, caches[i], false)
		})
		waitFor(b, func() bool { return rb.written(b)-written >= float64(n) })
		return caches
	}
	// resumeOnB resumes each session once on replica b, from Redis.
	resumeOnB := func(rb *replicaBuild, caches []tlcp.ClientSessionCache) {
		parallel(len(caches), func(i int) { handshake(rb.addrB, caches[i], true) })
	}
	// checkHits checks that replica b found n sessions in Redis since it
	// had hits.
	checkHits := func(rb *replicaBuild, hits float64, n int) {
		if got := rb.hits(b) - hits; got != float64(n) {
			b.Fatalf("%s: %v store hits for %d resumptions of sessions from another replica", rb.name, got, n)
		}
	}

	for _, rb := range builds {
		// One session made on b and resumed there: local hits.
		rb.local = tlcp.NewLRUClientSessionCache(1, 0)
		handshake(rb.addrB, rb.local, false)
	}
	// inTurn runs measure for each build, in alternating order from round
	// to round.
	inTurn := func(round int, measure func(rb *replicaBuild)) {
		order := slices.Clone(builds)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, rb := range order {
			measure(rb)
		}
	}
	b.ResetTimer()
	for round := range b.N {
		inTurn(round, func(rb *replicaBuild) {
			rb.localR = append(rb.localR, perCPUSecond(rb, resumedPerRound, func() {
				parallel(resumedPerRound, func(int) { handshake(rb.addrB, rb.local, true) })
			}))
		})
		fromA := map[*replicaBuild][]tlcp.ClientSessionCache{}
		for _, rb := range builds {
			fromA[rb] = sessionsFromA(rb, resumedPerRound)
		}
		inTurn(round, func(rb *replicaBuild) {
			hits := rb.hits(b)
			rb.redisR = append(rb.redisR, perCPUSecond(rb, resumedPerRound, func() { resumeOnB(rb, fromA[rb]) }))
			checkHits(rb, hits, resumedPerRound)
		})
		inTurn(round, func(rb *replicaBuild) {
			rb.fullR = append(rb.fullR, perCPUSecond(rb, fullPerRound, func() {
				parallel(fullPerRound, func(int) { handshake(rb.addrB, nil, false) })
			}))
		})
	}
	b.StopTimer()
	for _, rb := range builds {
		unit := ""
		if rb.name != "this" {
			unit = rb.name + "-"
		}
		for _, r := range []struct {
			name string
			v    []float64
		}{{"local", rb.localR}, {"redis", rb.redisR}, {"full", rb.fullR}} {
			med, lo, hi := medianSpread(r.v)
			b.ReportMetric(med, unit+r.name+"-hs/cpu-s")
			fmt.Printf("%s, %s build: %-5s handshakes per replica CPU-second: median %.0f, min %.0f, max %.0f over %d rounds: %.0f\n", suiteName, rb.name, r.name, med, lo, hi, len(r.v), r.v)
		}
		// Costs as shares of a full handshake's, per round (the three
		// loads of a round ran under the same conditions): what a
		// resumption from Redis costs, and what Redis adds to a
		// resumption from the local cache.
		var redisCost, localCost, redisExtra []float64
		for i := range rb.fullR {
			redisCost = append(redisCost, rb.fullR[i]/rb.redisR[i])
			localCost = append(localCost, rb.fullR[i]/rb.localR[i])
			redisExtra = append(redisExtra, (1/rb.redisR[i]-1/rb.localR[i])*rb.fullR[i])
		}
		for _, r := range []struct {
			name string
			v    []float64
		}{{"redis-cost/full", redisCost}, {"local-cost/full", localCost}, {"redis-extra/full", redisExtra}} {
			med, lo, hi := medianSpread(r.v)
			b.ReportMetric(med, unit+r.name)
			fmt.Printf("%s, %s build: %-16s median %.3f, min %.3f, max %.3f over %d rounds: %.3f\n", suiteName, rb.name, r.name, med, lo, hi, len(r.v), r.v)
		}
	}

	if profileDir == "" {
		return
	}
	// Profiles, one load at a time: a fixed number of handshakes each,
	// within the profile's window.
	const (
		profileSeconds = 10
		profileResumed = 10000
		profileFull    = 2500
	)
	for _, rb := range builds {
		for _, load := range []string{"local", "redis", "full"} {
			var run func()
			switch load {
			case "local":
				run = func() { parallel(profileResumed, func(int) { handshake(rb.addrB, rb.local, true) }) }
			case "redis":
				caches := sessionsFromA(rb, profileResumed)
				hits := rb.hits(b)
				run = func() {
					resumeOnB(rb, caches)
					checkHits(rb, hits, profileResumed)
				}
			case "full":
				run = func() { parallel(profileFull, func(int) { handshake(rb.addrB, nil, false) }) }
			}
			rb.profile(b, filepath.Join(profileDir, suiteName+"-"+rb.name+"-"+load+".pprof"), profileSeconds, run)
		}
	}
}

// replicaBuild is a gmgate build under BenchmarkReplicaResumption: two
// replicas, a (which makes sessions) and b (which is measured).
type replicaBuild struct {
	name    string
	prefix  string
	command func(args ...string) *exec.Cmd

	a, b         *served
	addrA, addrB string
	local        tlcp.ClientSessionCache

	localR, redisR, fullR []float64
}

func (rb *replicaBuild) start(t testing.TB, dir, cfg string, pinB []string, listener string) {
	t.Helper()
	for _, r := range []struct {
		name string
		s    **served
	}{{"a", &rb.a}, {"b", &rb.b}} {
		file := filepath.Join(dir, rb.name+"-"+r.name+".yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := rb.command("serve", "-c", file)
		if r.name == "b" && pinB != nil {
			args := append(slices.Clone(pinB), cmd.Path)
			cmd.Args = append(args, cmd.Args[1:]...)
			cmd.Path = pinB[0]
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
		}
		*r.s = startServe(t, cmd, "ecc", "ecdhe", "web")
	}
	rb.addrA, rb.addrB = rb.a.addrs[listener], rb.b.addrs[listener]
}

// cpu returns the CPU time of replica b in seconds: the run time of its
// threads, in nanoseconds (process_cpu_seconds_total counts in clock
// ticks of 10ms, too coarse for a round).
func (rb *replicaBuild) cpu(t testing.TB) float64 {
	t.Helper()
	pid := rb.b.cmd.Process.Pid
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return adminMetric(t, rb.b.admin, "process_cpu_seconds_total")
	}
	var ns int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that just exited
		}
		fields := bytes.Fields(b)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ns += n
	}
	return float64(ns) / 1e9
}

// hits returns replica b's store hits.
func (rb *replicaBuild) hits(t testing.TB) float64 {
	t.Helper()
	return storeMetric(t, &replicaProc{served: rb.b}, "hit")
}

// written returns the sessions replica a has written to Redis.
func (rb *replicaBuild) written(t testing.TB) float64 {
	t.Helper()
	return adminMetric(t, rb.a.admin, `gmgate_session_store_writes_total{op="set",result="ok"}`)
}

// profile writes a CPU profile of replica b over seconds, in which run
// runs once.
func (rb *replicaBuild) profile(t testing.TB, file string, seconds int, run func()) {
	t.Helper()
	ran := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		run()
		ran <- time.Since(start)
	}()
	resp, err := http.Get("http://" + rb.b.admin + "/debug/pprof/profile?seconds=" + strconv.Itoa(seconds))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prof, err := io.ReadAll(resp.Body)
	took := <-ran
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("profile of %s: %v %s", rb.name, err, resp.Status)
	}
	if took > time.Duration(seconds)*time.Second {
		t.Logf("%s: the load took %s, longer than the profile", file, took)
	}
	if err := os.WriteFile(file, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: CPU profile of replica b under this load", file)
}

func medianSpread(v []float64) (median, lo, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}

package main

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
)

// BenchmarkReplicaResumption measures what one TLCP handshake (ECC,
// SM4-GCM) costs a gmgate serve replica in CPU: resumed from its local
// cache, resumed from a session another replica made (a Redis hit: a
// lookup, opening the sealed session, parsing it), and a full handshake.
// Each iteration is one round of the three, in turn, so that the machine's
// other load falls on all three alike; the figures are handshakes per
// CPU-second of the replica (its process_cpu_seconds_total), medians of
// the rounds, with the spread (min-max) in the log, and the costs as
// shares of a full handshake's: redis-cost/full (a resumption from Redis),
// local-cost/full, and redis-extra/full (what the lookup adds).
//
//	go test -run '^$' -bench ReplicaResumption -benchtime 7x ./cmd/gmgate/
func BenchmarkReplicaResumption(b *testing.B) {
	const (
		resumedPerRound = 1500
		fullPerRound    = 300
		workers         = 4
	)
	rs := startRedis(b)
	dir := b.TempDir()
	p := newReplicaPKI(b, dir)
	up := namedUpstream(b, "app")
	cfg := replicaConfig(p, rs.addr(), up, "client_auth: none", p.files.CACert)
	a, measured := startReplica(b, dir, "a", cfg), startReplica(b, dir, "b", cfg)
	rc := redis.NewClient(&redis.Options{Addr: rs.addr()})
	defer rc.Close()
	addrA, addrB := a.addrs["ecc"], measured.addrs["ecc"]

	handshake := func(addr string, cache tlcp.ClientSessionCache, wantResumed bool) {
		st, err := tlcpHandshake(p, addr, tlcp.ECC_SM4_GCM_SM3, cache)
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
	cpu := func() float64 { return adminMetric(b, measured.admin, "process_cpu_seconds_total") }
	perCPUSecond := func(n int, run func()) float64 {
		before := cpu()
		run()
		used := cpu() - before
		if used <= 0 {
			b.Fatalf("replica b used no measurable CPU for %d handshakes", n)
		}
		return float64(n) / used
	}
	hitsOf := func() float64 { return storeMetric(b, measured, "hit") }

	// One session made on b and resumed there: local hits.
	local := tlcp.NewLRUClientSessionCache(1, 0)
	handshake(addrB, local, false)

	var localR, redisR, fullR []float64
	b.ResetTimer()
	for range b.N {
		localR = append(localR, perCPUSecond(resumedPerRound, func() {
			parallel(resumedPerRound, func(int) { handshake(addrB, local, true) })
		}))

		// Sessions made on a (not measured), each resumed once on b.
		caches := make([]tlcp.ClientSessionCache, resumedPerRound)
		parallel(resumedPerRound, func(i int) {
			caches[i] = tlcp.NewLRUClientSessionCache(1, 0)
			handshake(addrA, caches[i], false)
		})
		waitFor(b, func() bool {
			n, err := rc.DBSize(context.Background()).Result()
			return err == nil && n >= int64(resumedPerRound)*int64(len(redisR)+1)
		})
		hits := hitsOf()
		redisR = append(redisR, perCPUSecond(resumedPerRound, func() {
			parallel(resumedPerRound, func(i int) { handshake(addrB, caches[i], true) })
		}))
		if got := hitsOf() - hits; got != resumedPerRound {
			b.Fatalf("%v store hits for %d resumptions of sessions from another replica", got, resumedPerRound)
		}

		fullR = append(fullR, perCPUSecond(fullPerRound, func() {
			parallel(fullPerRound, func(int) { handshake(addrB, nil, false) })
		}))
	}
	b.StopTimer()
	for _, r := range []struct {
		name string
		v    []float64
	}{{"local", localR}, {"redis", redisR}, {"full", fullR}} {
		med, lo, hi := medianSpread(r.v)
		b.ReportMetric(med, r.name+"-hs/cpu-s")
		b.Logf("%-5s handshakes per replica CPU-second: median %.0f, min %.0f, max %.0f over %d rounds", r.name, med, lo, hi, len(r.v))
	}
	// Costs as shares of a full handshake's: what a resumption from
	// Redis costs, and what Redis adds to a resumption from the local
	// cache.
	lm, _, _ := medianSpread(localR)
	rm, _, _ := medianSpread(redisR)
	fm, _, _ := medianSpread(fullR)
	b.ReportMetric(fm/rm, "redis-cost/full")
	b.ReportMetric(fm/lm, "local-cost/full")
	b.ReportMetric((1/rm-1/lm)*fm, "redis-extra/full")
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

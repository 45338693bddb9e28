package sessionstore

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
)

// BenchmarkLookup measures what a session lookup costs the gateway's CPU:
// cpu-ns/op is this process's user and system time per lookup (from
// getrusage), which is what a replica pays, whereas ns/op is mostly the
// wait for Redis. "hit" asks a real redis-server (skipped without one)
// for a session not in the local cache, opens and parses it; "open" is
// the opening and parsing alone.
//
//	go test -run '^$' -bench Lookup -benchmem ./internal/sessionstore/
func BenchmarkLookup(b *testing.B) {
	keys := mustKeys(b, key1)
	st := testState(time.Now())
	id := []byte("0123456789abcdef0123456789abcdef")

	b.Run("open", func(b *testing.B) {
		s := &Store{keys: keys, prefix: "gmgate:"}
		key := s.SessionKey(id)
		sealed := sealState(b, keys, key, st)
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			plain, err := keys.open(sealed, key)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tlcp.ParseSessionState(plain); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})

	b.Run("hit", func(b *testing.B) {
		addr := testredis.Start(b).Addr()
		client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		s := New(Options{Client: client, Keys: keys, Prefix: "gmgate:", Timeout: time.Second})
		defer s.Close()
		// A local cache that keeps nothing: every lookup asks Redis.
		c := s.Cache(forgetful{}, time.Hour)
		key := s.SessionKey(id)
		if err := client.Set(context.Background(), key, sealState(b, keys, key, st), time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
		if _, ok := c.Get(id); !ok {
			b.Fatal("no hit")
		}
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if _, ok := c.Get(id); !ok {
				b.Fatal("no hit")
			}
		}
		cpu.report(b)
	})
}

// forgetful is a local session cache that keeps nothing.
type forgetful struct{}

func (forgetful) Get([]byte) (*tlcp.SessionState, bool) { return nil, false }
func (forgetful) Put([]byte, *tlcp.SessionState)        {}
func (forgetful) Delete([]byte)                         {}

// processCPU is the CPU time this process has used so far.
type processCPU time.Duration

func startCPU() processCPU {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return processCPU(time.Duration(ru.Utime.Nano() + ru.Stime.Nano()))
}

// report reports the CPU time since start per iteration as cpu-ns/op.
func (start processCPU) report(b *testing.B) {
	b.ReportMetric(float64(startCPU()-start)/float64(b.N), "cpu-ns/op")
}

package sessionstore

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counts records what a store reports.
type counts struct {
	mu      sync.Mutex
	lookups map[string]int
	writes  map[string]int
	up      bool
}

func newCounts() *counts {
	return &counts{lookups: map[string]int{}, writes: map[string]int{}}
}

func (c *counts) Lookup(result string, _ time.Duration) {
	c.mu.Lock()
	c.lookups[result]++
	c.mu.Unlock()
}

func (c *counts) Write(op, result string, n int, _ time.Duration) {
	c.mu.Lock()
	c.writes[op+" "+result] += n
	c.mu.Unlock()
}

func (c *counts) Up(up bool) {
	c.mu.Lock()
	c.up = up
	c.mu.Unlock()
}

func (c *counts) lookup(result string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups[result]
}

func (c *counts) write(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[what]
}

// replica is one gateway's view of the shared store.
type replica struct {
	store *Store
	obs   *counts
	logs  *testlog.Buffer
}

func newReplica(t *testing.T, addr string, keys *Keys, timeout time.Duration) *replica {
	t.Helper()
	r := &replica{obs: newCounts(), logs: &testlog.Buffer{}}
	client := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second,
	})
	r.store = New(Options{
		Client: client, Keys: keys, Prefix: "gmgate:", Timeout: timeout,
		ProbeInterval: 20 * time.Millisecond,
		Logger:        slog.New(slog.NewJSONHandler(r.logs, nil)),
		Observer:      r.obs,
	})
	t.Cleanup(r.store.Close)
	return r
}

func testState(created time.Time) *tlcp.SessionState {
	master := bytes.Repeat([]byte{0xA5, 0x5A, 0xC3}, 16)
	return &tlcp.SessionState{Version: tlcp.VersionTLCP, CipherSuite: tlcp.ECC_SM4_GCM_SM3, MasterSecret: master, CreatedAt: created, ServerName: "localhost"}
}

func TestSharedSessionsAreSealedAndExpire(t *testing.T) {
	mr := miniredis.RunT(t)
	keys := mustKeys(t, key1)
	a, b := newReplica(t, mr.Addr(), keys, time.Second), newReplica(t, mr.Addr(), keys, time.Second)
	lifetime := time.Hour
	ca := a.store.Cache(tlcp.NewLRUSessionCache(16, lifetime), lifetime)
	cb := b.store.Cache(tlcp.NewLRUSessionCache(16, lifetime), lifetime)

	id := bytes.Repeat([]byte{7}, 32)
	st := testState(time.Now().Add(-10 * time.Minute))
	ca.Put(id, st)
	key := a.store.SessionKey(id)
	if want := "gmgate:tlcp:" + strings.Repeat("07", 32); key != want {
		t.Fatalf("session key %q, want %q", key, want)
	}
	testwait.For(t, "the write reported", func() bool { return a.obs.write("set ok") == 1 })
	if !mr.Exists(key) {
		t.Fatal("the session is not in Redis")
	}
	// The TTL is what is left of the lifetime.
	if ttl := mr.TTL(key); ttl < 49*time.Minute || ttl > 50*time.Minute {
		t.Fatalf("TTL %v, want about 50m", ttl)
	}
	v, _ := mr.Get(key)
	if bytes.Contains([]byte(v), st.MasterSecret[:8]) {
		t.Fatal("Redis holds the master secret in the clear")
	}

	got, ok := cb.Get(id)
	if !ok || !bytes.Equal(got.MasterSecret, st.MasterSecret) || got.ServerName != "localhost" {
		t.Fatalf("replica b: %v %v", got, ok)
	}
	if b.obs.lookup(LookupHit) != 1 {
		t.Fatalf("lookups: %v", b.obs.lookups)
	}
	// Next time b answers from its local cache.
	if _, ok := cb.Get(id); !ok || b.obs.lookup(LookupLocal) != 1 {
		t.Fatalf("second lookup on b: %v, %v", ok, b.obs.lookups)
	}
	// And a never asks Redis for its own session.
	if _, ok := ca.Get(id); !ok || a.obs.lookup(LookupLocal) != 1 || a.obs.lookup(LookupHit) != 0 {
		t.Fatalf("lookup on a: %v, %v", ok, a.obs.lookups)
	}

	// A session past its lifetime is not resumed, even when Redis or the
	// local cache still hold it.
	old := bytes.Repeat([]byte{8}, 32)
	oldState := testState(time.Now().Add(-2 * time.Hour))
	sealed := sealState(t, keys, a.store.SessionKey(old), oldState)
	mr.Set(a.store.SessionKey(old), string(sealed))
	if _, ok := cb.Get(old); ok {
		t.Fatal("an expired session from Redis was resumed")
	}
	shortLocal := tlcp.NewLRUSessionCache(16, 0)
	shortLocal.Put(old, oldState)
	if _, ok := b.store.Cache(shortLocal, lifetime).Get(old); ok {
		t.Fatal("an expired session from the local cache was resumed")
	}

	// A value moved to another session's key does not open.
	moved := bytes.Repeat([]byte{9}, 32)
	mr.Set(b.store.SessionKey(moved), v)
	if _, ok := cb.Get(moved); ok || b.obs.lookup(LookupInvalid) != 1 {
		t.Fatalf("a value under another key resumed: %v, %v", ok, b.obs.lookups)
	}
	// Nor does one sealed with a key b does not have.
	other := newReplica(t, mr.Addr(), mustKeys(t, key2), time.Second)
	if _, ok := other.store.Cache(tlcp.NewLRUSessionCache(16, lifetime), lifetime).Get(id); ok || other.obs.lookup(LookupInvalid) != 1 {
		t.Fatalf("a value opened with another key: %v, %v", ok, other.obs.lookups)
	}

	// Delete removes the session everywhere.
	cb.Delete(id)
	testwait.For(t, "the session deleted from Redis", func() bool { return !mr.Exists(key) })
	if _, ok := cb.Get(id); ok {
		t.Fatal("a deleted session resumed")
	}
}

// A value the previous sealed format (version 1) wrote, one changed in
// Redis, or a session state of the previous version (2) is a miss that
// leaves the store up: the client makes a full handshake, and a good value
// under the same key resumes next.
func TestOldOrChangedValuesMiss(t *testing.T) {
	mr := miniredis.RunT(t)
	keys := mustKeys(t, key1)
	b := newReplica(t, mr.Addr(), keys, time.Second)
	cb := b.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	id := bytes.Repeat([]byte{5}, 32)
	key := b.store.SessionKey(id)
	plain, err := testState(time.Now()).Marshal()
	if err != nil {
		t.Fatal(err)
	}

	// Version 1: a 16-byte salt, the key and nonce by HKDF-SM3.
	v1 := append([]byte{1}, keys.keys[0].id[:]...)
	v1 = append(v1, bytes.Repeat([]byte{0x33}, 16)...)
	okm, err := hkdf.Key(sm3.New, keys.keys[0].secret[:], v1[5:], "gmgate seal v1", 28)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := sm4.NewCipher(okm[:16])
	gcm, _ := cipher.NewGCM(block)
	v1 = gcm.Seal(v1, okm[16:], plain, append(bytes.Clone(v1), key...))

	// A session state of version 2 (before the chains), sealed as now:
	// opens, does not parse.
	if plain[0] != 3 || plain[len(plain)-1] != 0 {
		t.Fatalf("the test state is not a version 3 state without chains: %x", plain)
	}
	state2 := append([]byte{2}, plain[1:len(plain)-1]...)
	sealed2, err := keys.Seal(state2, []byte(key))
	if err != nil {
		t.Fatal(err)
	}

	good := sealState(t, keys, key, testState(time.Now()))
	changed := bytes.Clone(good)
	changed[len(changed)-20] ^= 1
	for i, v := range [][]byte{v1, changed, sealed2} {
		mr.Set(key, string(v))
		if _, ok := cb.Get(id); ok || b.obs.lookup(LookupInvalid) != i+1 || !b.store.Up() {
			t.Fatalf("value %d: resumed %v, lookups %v, store up %v", i, ok, b.obs.lookups, b.store.Up())
		}
	}
	mr.Set(key, string(good))
	if st, ok := cb.Get(id); !ok || st.ServerName != "localhost" || b.obs.lookup(LookupHit) != 1 {
		t.Fatalf("the good value: resumed %v, lookups %v", ok, b.obs.lookups)
	}
}

func sealState(t testing.TB, keys *Keys, key string, st *tlcp.SessionState) []byte {
	t.Helper()
	plain, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := keys.Seal(plain, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// TestRedisDownCostsAFullHandshake stops Redis under a replica: lookups
// miss without being sent once Redis is known down, one line says so, and
// when Redis is back the store finds it and shares again.
func TestRedisDownCostsAFullHandshake(t *testing.T) {
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	keys := mustKeys(t, key1)
	a, b := newReplica(t, addr, keys, time.Second), newReplica(t, addr, keys, time.Second)
	ca := a.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	cb := b.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)

	mr.Close()
	id := bytes.Repeat([]byte{1}, 32)
	if _, ok := cb.Get(id); ok {
		t.Fatal("a lookup with Redis down found a session")
	}
	// Failed, or not sent when the store's first ping already found
	// Redis gone.
	if b.obs.lookup(LookupError)+b.obs.lookup(LookupUnavailable) != 1 || b.store.Up() {
		t.Fatalf("lookups %v, up %v", b.obs.lookups, b.store.Up())
	}
	for range 100 {
		cb.Get(id)
	}
	if b.obs.lookup(LookupUnavailable) < 99 {
		t.Fatalf("lookups %v: with Redis down, lookups should not be sent", b.obs.lookups)
	}
	// The store's first probe may be the one that found Redis gone: it
	// marks the store down, then writes the line, in its own goroutine.
	testwait.For(t, "the unreachable line", func() bool { return strings.Contains(b.logs.String(), "session store unreachable") })
	if n := strings.Count(b.logs.String(), "session store unreachable"); n != 1 {
		t.Fatalf("%d unreachable lines, want 1:\n%s", n, b.logs)
	}
	// Sessions made meanwhile stay local.
	ca.Put(id, testState(time.Now()))
	if _, ok := ca.Get(id); !ok {
		t.Fatal("the local cache lost a session while Redis was down")
	}

	if err := mr.StartAddr(addr); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "b to find Redis back", b.store.Up)
	testwait.For(t, "the reachable-again line", func() bool { return strings.Contains(b.logs.String(), "session store reachable again") })
	ca.Put(id, testState(time.Now()))
	testwait.For(t, "a to find Redis back", a.store.Up)
	// a's first write after the outage may be the one that finds it
	// down; the probe brings it back, and the next one lands.
	testwait.For(t, "a session in Redis", func() bool {
		ca.Put(id, testState(time.Now()))
		time.Sleep(10 * time.Millisecond)
		return mr.Exists(a.store.SessionKey(id))
	})
	if _, ok := cb.Get(id); !ok {
		t.Fatal("no hit once Redis is back")
	}
}

// hungServer accepts connections and never answers; a connection ends
// when the client closes it.
func hungServer(t *testing.T) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
}

// TestHungRedisIsBounded points a store at a server that accepts and
// never answers: a lookup gives up at its timeout, far below anything
// else that would end it (go-redis's own read timeout is 3s).
func TestHungRedisIsBounded(t *testing.T) {
	r := newReplica(t, hungServer(t), mustKeys(t, key1), 30*time.Millisecond)
	c := r.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	start := time.Now()
	if _, ok := c.Get(bytes.Repeat([]byte{1}, 32)); ok {
		t.Fatal("found a session on a server that never answers")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a lookup on a hung Redis took %v with a 30ms timeout", d)
	}
	if r.obs.lookup(LookupError) != 1 || r.store.Up() {
		t.Fatalf("lookups %v, up %v", r.obs.lookups, r.store.Up())
	}
}

// TestWritesNeverWait fills the write queue of a store whose writer is
// stuck on a Redis that does not answer: Put returns at once, and what
// does not fit in the queue is dropped and counted.
func TestWritesNeverWait(t *testing.T) {
	obs := newCounts()
	client := redis.NewClient(&redis.Options{Addr: hungServer(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	// The writer stays stuck for WriteTimeout: a Put that waited for it
	// would take that long.
	const stuck = 3 * time.Second
	s := New(Options{Client: client, Keys: mustKeys(t, key1), Prefix: "p:", Queue: 4, WriteTimeout: stuck, Observer: obs})
	defer s.Close()
	c := s.Cache(tlcp.NewLRUSessionCache(64, time.Hour), time.Hour)
	start := time.Now()
	for i := range 64 {
		c.Put(bytes.Repeat([]byte{byte(i + 1)}, 32), testState(time.Now()))
	}
	if d := time.Since(start); d >= stuck {
		t.Fatalf("64 writes to a hung Redis took %v: Put waited for the writer", d)
	}
	if n := obs.write("set dropped"); n == 0 {
		t.Fatalf("%d writes dropped of 64 with a queue of 4: %v", n, obs.writes)
	}
	// The stuck batch times out and marks Redis down.
	testwait.For(t, "the store to find Redis down", func() bool { return !s.Up() })
}

// TestResumeOnAnotherReplica makes a full TLCP handshake with one server
// and resumes the session on another that shares only Redis with it.
func TestResumeOnAnotherReplica(t *testing.T) {
	mr := miniredis.RunT(t)
	keys := mustKeys(t, key1)
	ca := testpki.NewCA(t, "store test CA")
	d := ca.IssueDual(t, "localhost", []string{"localhost"}, nil)
	cert := tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
	server := func(r *replica) *tlcp.Config {
		return &tlcp.Config{
			Certificates:   []tlcp.Certificate{cert},
			SessionCache:   r.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour),
			SessionContext: "edge",
			CipherSuites:   []uint16{tlcp.ECC_SM4_GCM_SM3},
		}
	}
	r1, r2 := newReplica(t, mr.Addr(), keys, time.Second), newReplica(t, mr.Addr(), keys, time.Second)
	s1, s2 := server(r1), server(r2)
	client := &tlcp.Config{RootCAs: ca.Roots, ServerName: "localhost", ClientSessionCache: tlcp.NewLRUClientSessionCache(4, 0), CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}

	if handshake(t, client, s1).DidResume {
		t.Fatal("the first handshake resumed")
	}
	testwait.For(t, "the session in Redis", func() bool { return len(mr.Keys()) == 1 })
	st := handshake(t, client, s2)
	if !st.DidResume {
		t.Fatal("no resumption on the second replica")
	}
	if r2.obs.lookup(LookupHit) != 1 {
		t.Fatalf("replica 2 lookups: %v", r2.obs.lookups)
	}
	// Another listener's name (another binding) does not resume it.
	s3 := server(newReplica(t, mr.Addr(), keys, time.Second))
	s3.SessionContext = "internal"
	if handshake(t, client, s3).DidResume {
		t.Fatal("a session resumed under another SessionContext")
	}
}

func handshake(t *testing.T, client, server *tlcp.Config) tlcp.ConnectionState {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	errc := make(chan error, 1)
	go func() {
		s := tlcp.Server(sc, server)
		errc <- s.HandshakeContext(context.Background())
	}()
	c := tlcp.Client(cc, client)
	if err := c.HandshakeContext(context.Background()); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	return c.ConnectionState()
}

// roundTrips counts the requests a Redis client sends (a command alone, or
// a pipeline), and holds each of the first ones for a while, so that
// lookups pile up behind them.
type roundTrips struct {
	mu       sync.Mutex
	n        int
	lookups  int
	holdFor  time.Duration
	holdUpTo int
}

func (h *roundTrips) started(cmds int) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.lookups += cmds
	if h.n <= h.holdUpTo {
		return h.holdFor
	}
	return 0
}

func (h *roundTrips) count() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.lookups
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// Session lookups, not the store's probe.
		if cmd.Name() == "get" && cmd.Args()[1] != "gmgate:tlcp:probe" {
			time.Sleep(h.started(1))
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "get" {
			time.Sleep(h.started(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// TestLookupsShareRoundTrips makes many lookups at once while Redis is
// slow to answer: they reach Redis in a few pipelines, not one round trip
// each, and each gets its own answer (hits and misses mixed).
func TestLookupsShareRoundTrips(t *testing.T) {
	mr := miniredis.RunT(t)
	keys := mustKeys(t, key1)
	a := newReplica(t, mr.Addr(), keys, time.Second)
	lifetime := time.Hour
	ca := a.store.Cache(tlcp.NewLRUSessionCache(256, lifetime), lifetime)
	const n = 100
	id := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 32) }
	for i := range n {
		if i%4 == 0 {
			continue // a miss
		}
		st := testState(time.Now())
		st.ServerName = fmt.Sprintf("host%d.example", i)
		ca.Put(id(i), st)
	}
	testwait.For(t, "the writes", func() bool { return len(mr.Keys()) == n-n/4 })

	hook := &roundTrips{holdFor: 50 * time.Millisecond, holdUpTo: lookupSenders}
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	client.AddHook(hook)
	obs := newCounts()
	b := New(Options{Client: client, Keys: keys, Prefix: "gmgate:", Timeout: 2 * time.Second, Observer: obs})
	defer b.Close()
	cb := b.Cache(tlcp.NewLRUSessionCache(256, lifetime), lifetime)

	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			st, ok := cb.Get(id(i))
			switch {
			case i%4 == 0 && ok:
				errs <- fmt.Sprintf("session %d was never stored but was found", i)
			case i%4 != 0 && !ok:
				errs <- fmt.Sprintf("session %d not found", i)
			case ok && st.ServerName != fmt.Sprintf("host%d.example", i):
				errs <- fmt.Sprintf("session %d: got the session of %s", i, st.ServerName)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	trips, sent := hook.count()
	if sent != n {
		t.Fatalf("%d lookups reached Redis, want %d", sent, n)
	}
	if trips > n/5 {
		t.Errorf("%d lookups took %d round trips, want them shared", n, trips)
	}
	if obs.lookup(LookupHit) != n-n/4 || obs.lookup(LookupMiss) != n/4 {
		t.Errorf("lookups reported: %v", obs.lookups)
	}
	t.Logf("%d lookups in %d round trips", n, trips)
}

// TestLookupAfterClose: a store closed by a reload answers a lookup that
// still comes at once, as a miss, rather than at its timeout.
func TestLookupAfterClose(t *testing.T) {
	mr := miniredis.RunT(t)
	r := newReplica(t, mr.Addr(), mustKeys(t, key1), 2*time.Second)
	c := r.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	r.store.Close()
	start := time.Now()
	if _, ok := c.Get(bytes.Repeat([]byte{3}, 32)); ok {
		t.Fatal("a closed store found a session")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a lookup on a closed store took %v", d)
	}
	if r.obs.lookup(LookupError) != 1 {
		t.Fatalf("lookups %v", r.obs.lookups)
	}
}

// TestRefusedWritesKeepRedisUp runs a real Redis that answers lookups and
// refuses writes: out of memory (maxmemory reached under the noeviction
// policy), a master demoted to a replica of another (still named in
// addrs), and a user without write rights. The store stays up, so a
// session written before goes on resuming on the other replica; the
// refused writes are counted and logged once per interval with the
// reason, and once Redis takes writes again new sessions are shared.
func TestRefusedWritesKeepRedisUp(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, reason, cause string
		// refuse makes Redis refuse writes (and may add a replica's
		// sync); accept undoes it.
		refuse, accept func(t *testing.T, rs *testredis.Server, admin *redis.Client)
	}{{
		name: "out of memory", reason: "Redis is out of memory", cause: "OOM",
		refuse: func(t *testing.T, _ *testredis.Server, admin *redis.Client) {
			do(t, admin, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			do(t, admin, "CONFIG", "SET", "maxmemory", "1")
		},
		accept: func(t *testing.T, _ *testredis.Server, admin *redis.Client) {
			do(t, admin, "CONFIG", "SET", "maxmemory", "0")
		},
	}, {
		name: "a demoted master", reason: "is a read-only replica", cause: "READONLY",
		refuse: func(t *testing.T, rs *testredis.Server, admin *redis.Client) {
			// A failover: another server copies this one, becomes the
			// master, and this one its replica, with the same data.
			other := testredis.Start(t)
			oc := other.Client()
			defer oc.Close()
			do(t, oc, append([]any{"REPLICAOF"}, hostPort(rs.Addr())...)...)
			testwait.For(t, "the copy", func() bool { return synced(oc) })
			do(t, oc, "REPLICAOF", "NO", "ONE")
			do(t, admin, append([]any{"REPLICAOF"}, hostPort(other.Addr())...)...)
			testwait.For(t, "the demoted master to sync", func() bool { return synced(admin) })
		},
		accept: func(t *testing.T, _ *testredis.Server, admin *redis.Client) { do(t, admin, "REPLICAOF", "NO", "ONE") },
	}, {
		name: "a user without writes", reason: "may not write sessions", cause: "NOPERM",
		refuse: func(t *testing.T, _ *testredis.Server, admin *redis.Client) {
			do(t, admin, "ACL", "SETUSER", "default", "-@write")
		},
		accept: func(t *testing.T, _ *testredis.Server, admin *redis.Client) {
			do(t, admin, "ACL", "SETUSER", "default", "+@write")
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := testredis.Start(t)
			admin := rs.Client()
			defer admin.Close()
			keys := mustKeys(t, key1)
			a, b := newReplica(t, rs.Addr(), keys, time.Second), newReplica(t, rs.Addr(), keys, time.Second)
			ca := a.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
			cb := b.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
			stored := func(id []byte) bool { return admin.Exists(ctx, a.store.SessionKey(id)).Val() == 1 }

			before := bytes.Repeat([]byte{1}, 32)
			ca.Put(before, testState(time.Now()))
			testwait.For(t, "the first session in Redis", func() bool { return stored(before) })

			tc.refuse(t, rs, admin)
			refused := bytes.Repeat([]byte{2}, 32)
			ca.Put(refused, testState(time.Now()))
			testwait.For(t, "a refused write", func() bool { return a.obs.write("set "+WriteRefused) == 1 })
			ca.Put(bytes.Repeat([]byte{3}, 32), testState(time.Now()))
			testwait.For(t, "a second refused write", func() bool { return a.obs.write("set "+WriteRefused) == 2 })
			if !a.store.Up() || a.obs.write("set "+WriteError) != 0 {
				t.Fatalf("a refusal marked the store down (up %v, writes %v)", a.store.Up(), a.obs.writes)
			}
			if stored(refused) {
				t.Fatal("Redis took the write: the test proves nothing")
			}
			logs := a.logs.String()
			if n := strings.Count(logs, "session store refuses new sessions"); n != 1 || !strings.Contains(logs, tc.reason) || !strings.Contains(logs, tc.cause) || strings.Contains(logs, "unreachable") {
				t.Fatalf("%d refusal lines for two refused writes in one interval, want 1 saying %q and %q and no outage:\n%s", n, tc.reason, tc.cause, logs)
			}
			// Lookups go on: the session written before resumes on b,
			// the refused one is a miss.
			if _, ok := cb.Get(before); !ok {
				t.Fatalf("a session stored before the refusals did not resume on the other replica (lookups %v)", b.obs.lookups)
			}
			if _, ok := cb.Get(refused); ok {
				t.Fatal("a refused session resumed on the other replica")
			}
			if !b.store.Up() || b.obs.lookup(LookupHit) != 1 || b.obs.lookup(LookupMiss) != 1 {
				t.Fatalf("b: up %v, lookups %v", b.store.Up(), b.obs.lookups)
			}

			tc.accept(t, rs, admin)
			after := bytes.Repeat([]byte{4}, 32)
			testwait.For(t, "a session written once Redis takes writes", func() bool {
				ca.Put(after, testState(time.Now()))
				time.Sleep(10 * time.Millisecond)
				return stored(after)
			})
			if _, ok := cb.Get(after); !ok {
				t.Fatal("a session written once Redis took writes again did not resume on the other replica")
			}
		})
	}
}

func do(t *testing.T, c *redis.Client, args ...any) {
	t.Helper()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// refusedGets is how many GET commands Redis refused or failed, from
// its command statistics.
func refusedGets(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_get:")
		if !ok {
			continue
		}
		for _, field := range strings.Split(stats, ",") {
			name, value, _ := strings.Cut(field, "=")
			if name == "rejected_calls" || name == "failed_calls" {
				v, _ := strconv.Atoi(value)
				n += v
			}
		}
	}
	return n
}

func hostPort(addr string) []any {
	host, port, _ := strings.Cut(addr, ":")
	return []any{host, port}
}

// synced reports whether the replica c has its master's data.
func synced(c *redis.Client) bool {
	info := c.Info(context.Background(), "replication").Val()
	return strings.Contains(info, "master_link_status:up") && !strings.Contains(info, "master_sync_in_progress:1")
}

// A user that may not read sessions leaves the store down until it may:
// the probe asks what a lookup asks, not a PING that any user may send.
func TestUserWithoutReadsStaysDown(t *testing.T) {
	rs := testredis.Start(t)
	admin := rs.Client()
	defer admin.Close()
	keys := mustKeys(t, key1)
	a, b := newReplica(t, rs.Addr(), keys, time.Second), newReplica(t, rs.Addr(), keys, time.Second)
	ca := a.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	cb := b.store.Cache(tlcp.NewLRUSessionCache(16, time.Hour), time.Hour)
	id := bytes.Repeat([]byte{5}, 32)
	ca.Put(id, testState(time.Now()))
	testwait.For(t, "the session in Redis", func() bool { return a.obs.write("set "+WriteOK) == 1 })

	do(t, admin, "ACL", "SETUSER", "default", "-@read")
	if _, ok := cb.Get(id); ok {
		t.Fatal("a lookup refused by Redis resumed")
	}
	if b.store.Up() || b.obs.lookup(LookupError) != 1 {
		t.Fatalf("a refused lookup: up %v, lookups %v", b.store.Up(), b.obs.lookups)
	}
	// Many probes later (Redis counts the lookups it refused), the store
	// is still down, and said so once.
	refused := refusedGets(t, admin)
	testwait.For(t, "five more refused probes", func() bool {
		if b.store.Up() {
			t.Fatalf("a user that may not read sessions was taken for up again:\n%s", b.logs)
		}
		return refusedGets(t, admin) >= refused+5
	})
	logs := b.logs.String()
	if n := strings.Count(logs, "session store refuses lookups"); n != 1 || !strings.Contains(logs, "may not read sessions") || !strings.Contains(logs, "NOPERM") || strings.Contains(logs, "unreachable") {
		t.Fatalf("%d lines for a user without reads, want 1 naming the fix and NOPERM:\n%s", n, logs)
	}

	do(t, admin, "ACL", "SETUSER", "default", "+@read")
	testwait.For(t, "the store up once the user may read", b.store.Up)
	if _, ok := cb.Get(id); !ok {
		t.Fatalf("the session did not resume once the user may read (lookups %v)", b.obs.lookups)
	}
	if !strings.Contains(b.logs.String(), "session store reachable again") {
		t.Fatalf("no line says the store is back:\n%s", b.logs)
	}
}

package acme

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/gmgate/gmgate/internal/sessionstore"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/internal/testwait"
)

func newRedisStorage(t *testing.T, mr *miniredis.Miniredis) *RedisStorage {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	return NewRedisStorage(client, "gmgate:acme:", testSealer(t))
}

func TestRedisStorage(t *testing.T) {
	mr := miniredis.RunT(t)
	s := newRedisStorage(t, mr)
	ctx := context.Background()

	secret := []byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIAAAA\n")
	files := map[string][]byte{
		"certificates/ca/a.example/a.example.key": secret,
		"certificates/ca/a.example/a.example.crt": []byte("cert a"),
		"certificates/ca/b.example/b.example.crt": []byte("cert b"),
		"acme/ca/users/x@y/x.json":                []byte("{}"),
	}
	for k, v := range files {
		if err := s.Store(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range files {
		got, err := s.Load(ctx, k)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Load(%s) = %q, %v", k, got, err)
		}
	}
	// What Redis holds is sealed: no private key in the clear.
	for _, rk := range mr.Keys() {
		if v := mr.HGet(rk, "v"); bytes.Contains([]byte(v), []byte("PRIVATE KEY")) {
			t.Fatalf("%s holds a private key in the clear", rk)
		}
	}
	// A value moved under another key does not open.
	mr.HSet("gmgate:acme:f:certificates/ca/b.example/b.example.key", "v", mr.HGet("gmgate:acme:f:certificates/ca/a.example/a.example.key", "v"))
	if _, err := s.Load(ctx, "certificates/ca/b.example/b.example.key"); err == nil {
		t.Fatal("a value moved to another key opened")
	}
	mr.Del("gmgate:acme:f:certificates/ca/b.example/b.example.key")

	if _, err := s.Load(ctx, "certificates/ca/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing key: %v", err)
	}
	for _, k := range []string{"certificates", "certificates/ca/a.example", "certificates/ca/a.example/a.example.crt"} {
		if !s.Exists(ctx, k) {
			t.Errorf("Exists(%s) = false", k)
		}
	}
	for _, k := range []string{"certificates/c", "certificates/ca/a.exam", "nothing"} {
		if s.Exists(ctx, k) {
			t.Errorf("Exists(%s) = true", k)
		}
	}
	got, err := s.List(ctx, "certificates/ca", false)
	if want := []string{"certificates/ca/a.example", "certificates/ca/b.example"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("List = %v, %v; want %v", got, err, want)
	}
	got, err = s.List(ctx, "certificates", true)
	if err != nil || len(got) != 3 {
		t.Errorf("recursive List = %v, %v", got, err)
	}
	if _, err := s.List(ctx, "missing", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing directory: %v", err)
	}
	info, err := s.Stat(ctx, "certificates/ca/a.example/a.example.crt")
	if err != nil || !info.IsTerminal || info.Size != 6 || time.Since(info.Modified) > time.Minute {
		t.Errorf("Stat = %+v, %v", info, err)
	}
	if info, err := s.Stat(ctx, "certificates/ca"); err != nil || info.IsTerminal {
		t.Errorf("Stat of a directory = %+v, %v", info, err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a missing key: %v", err)
	}
	// Deleting a directory deletes what is under it, and nothing else.
	if err := s.Delete(ctx, "certificates/ca/a.example"); err != nil {
		t.Fatal(err)
	}
	if s.Exists(ctx, "certificates/ca/a.example/a.example.key") || !s.Exists(ctx, "certificates/ca/b.example/b.example.crt") {
		t.Error("Delete of a directory removed the wrong keys")
	}
	if err := s.Delete(ctx, "certificates/ca/none"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
}

func TestRedisStorageLock(t *testing.T) {
	mr := miniredis.RunT(t)
	a, b := newRedisStorage(t, mr), newRedisStorage(t, mr)
	lockHandover(t, a, b, "issue_cert_a.example")
	ctx := context.Background()

	// A holder that died stops extending its lock: it expires.
	got := make(chan error, 1)
	mr.Set("gmgate:acme:lock:issue_cert_b.example", "dead holder's token")
	mr.SetTTL("gmgate:acme:lock:issue_cert_b.example", RedisLockTTL)
	tries := make(chan struct{}, 1)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	client.AddHook(setHook{tries})
	t.Cleanup(func() { client.Close() })
	c := NewRedisStorage(client, "gmgate:acme:", testSealer(t))
	go func() { got <- c.Lock(ctx, "issue_cert_b.example") }()
	// Only once Lock has found the lock held does its expiry test
	// anything.
	select {
	case <-tries:
	case err := <-got:
		t.Fatalf("Lock returned before it tried: %v", err)
	}
	mr.FastForward(RedisLockTTL + time.Second)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an abandoned lock never expired")
	}
	if v, _ := mr.Get("gmgate:acme:lock:issue_cert_b.example"); v == "dead holder's token" {
		t.Fatal("the lock still names the dead holder")
	}
	if err := c.Unlock(ctx, "issue_cert_b.example"); err != nil {
		t.Fatal(err)
	}
}

// setHook tells of each SET a client has sent and had answered (a lock
// attempt is a SET NX).
type setHook struct{ done chan<- struct{} }

func (h setHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h setHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "set" {
			select {
			case h.done <- struct{}{}:
			default:
			}
		}
		return err
	}
}

func (h setHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// lockHandover checks that b waits while a holds the lock name, gets it
// once a lets go, and cannot unlock it twice.
func lockHandover(t *testing.T, a, b *RedisStorage, name string) {
	t.Helper()
	ctx := context.Background()
	if err := a.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	// b waits while a holds the lock...
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if err := b.Lock(short, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second holder got the lock: %v", err)
	}
	// ...and gets it once a lets go.
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, name) }()
	if err := a.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not handed over")
	}
	if err := b.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx, name); err == nil {
		t.Fatal("unlocked a lock not held")
	}
}

// TestRedisStorageOverCluster runs the storage on a Redis Cluster of
// three nodes: files spread over every node are all listed, found and
// deleted, and the lock works as on one server.
func TestRedisStorageOverCluster(t *testing.T) {
	cluster := testredis.StartCluster(t, 3)
	storage := func() *RedisStorage {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { client.Close() })
		return NewRedisStorage(client, "gmgate:acme:", testSealer(t))
	}
	a, b := storage(), storage()
	ctx := context.Background()

	const hosts = 20
	var want []string
	for i := range hosts {
		dir := fmt.Sprintf("certificates/ca/h%d.example", i)
		for _, f := range []string{".crt", ".key"} {
			k := fmt.Sprintf("%s/h%d.example%s", dir, i, f)
			if err := a.Store(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
			want = append(want, k)
		}
	}
	slices.Sort(want)
	for i, n := range cluster.Keys(t) {
		if n == 0 {
			t.Fatalf("node %s holds none of the %d files: the test proves nothing", cluster.Nodes[i].Addr(), len(want))
		}
	}
	got, err := b.List(ctx, "certificates", true)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("recursive List on the cluster = %v, %v; want the %d files %v", got, err, len(want), want)
	}
	dirs, err := b.List(ctx, "certificates/ca", false)
	if err != nil || len(dirs) != hosts {
		t.Fatalf("List of certificates/ca = %v, %v; want %d directories", dirs, err, hosts)
	}
	for _, k := range want {
		if v, err := b.Load(ctx, k); err != nil || string(v) != k {
			t.Fatalf("Load(%s) = %q, %v", k, v, err)
		}
	}
	if err := b.Delete(ctx, "certificates/ca"); err != nil {
		t.Fatal(err)
	}
	if left, err := a.List(ctx, "certificates", true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after deleting the directory, List = %v, %v", left, err)
	}
	if total := slices.Max(cluster.Keys(t)); total != 0 {
		t.Fatalf("keys left on the nodes after the delete: %v", cluster.Keys(t))
	}

	lockHandover(t, a, b, "issue_cert_a.example")
}

// TestACMEAcrossReplicas runs two ACME managers that share a Redis
// storage, behind one challenge port that a load balancer spreads over
// both: one order is made, and both serve its certificate.
func TestACMEAcrossReplicas(t *testing.T) {
	_, challengeLn, opts := pebbleHTTP01(t)
	mr := miniredis.RunT(t)

	var replicas []*Manager
	for range 2 {
		opts.Storage = newRedisStorage(t, mr)
		a, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Stop)
		replicas = append(replicas, a)
	}
	// Each challenge request goes to the other replica than the last.
	var turn atomic.Int64
	lb := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := replicas[turn.Add(1)%2]
		a.HTTPChallengeHandler(http.NotFoundHandler()).ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: lb, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(challengeLn)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, a := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.Manage(ctx)
		}()
	}
	wg.Wait()
	var serials []string
	orders := 0
	for i, a := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		certs := a.cache.AllMatchingCertificates(acmeTestDomain)
		if len(certs) == 0 {
			t.Fatalf("replica %d serves no certificate", i)
		}
		serials = append(serials, certs[0].Leaf.SerialNumber.String())
		a.mu.Lock()
		orders += int(a.issuance[[2]string{"new", "success"}])
		a.mu.Unlock()
	}
	if orders != 1 || serials[0] != serials[1] {
		t.Fatalf("%d orders, serials %v: want one certificate obtained once and loaded by the other replica", orders, serials)
	}
	// The certificate's key is in Redis, sealed.
	var found bool
	for _, k := range mr.Keys() {
		found = found || bytes.HasSuffix([]byte(k), []byte(".key"))
	}
	if !found {
		t.Fatalf("no key in Redis: %v", mr.Keys())
	}
}

// testSealer seals the shared storage's values in tests.
func testSealer(t *testing.T) Sealer {
	t.Helper()
	keys, err := sessionstore.ParseKeys("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "test")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A replica that starts while Redis is down (a Redis pod still starting,
// a failover under way) or refuses writes (out of memory) obtains its
// certificate once Redis is back, without a restart or a reload.
func TestACMEStartsBeforeRedis(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail, heal func(*testing.T, *testredis.Server)
	}{
		{"down", func(t *testing.T, s *testredis.Server) { s.Kill() }, func(t *testing.T, s *testredis.Server) { s.Start() }},
		{"out of memory", func(t *testing.T, s *testredis.Server) { configSet(t, s, "maxmemory", "1") }, func(t *testing.T, s *testredis.Server) { configSet(t, s, "maxmemory", "0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, challengeLn, opts := pebbleHTTP01(t)
			var logs testlog.Buffer
			opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			srv := testredis.Start(t)
			client := srv.Client()
			t.Cleanup(func() { client.Close() })
			opts.Storage = NewRedisStorage(client, "gmgate:acme:", testSealer(t))
			tc.fail(t, srv)

			a, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Stop)
			serveHTTP01(t, a, challengeLn)
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, "an error logged while Redis fails", func() bool { return strings.Contains(logs.String(), `"level":"ERROR"`) })
			tc.heal(t, srv)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for len(a.cache.AllMatchingCertificates(acmeTestDomain)) == 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("no certificate two minutes after Redis came back; log:\n%s", logs.String())
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
}

// configSet sets a parameter of a running redis-server.
func configSet(t *testing.T, s *testredis.Server, param, value string) {
	t.Helper()
	c := s.Client()
	defer c.Close()
	if err := c.ConfigSet(context.Background(), param, value).Err(); err != nil {
		t.Fatal(err)
	}
}

// Stop, as a reload that changes or removes a listener's ACME settings
// does, ends the manager's order and releases its lock: certmagic keeps
// retrying a failed order, holding the lock, for up to 30 days, and the
// manager that replaces this one (or another replica) would wait for it.
func TestACMEStopReleasesLock(t *testing.T) {
	srv := testredis.Start(t)
	client := srv.Client()
	t.Cleanup(func() { client.Close() })
	// An ACME CA that is down: every order fails and is retried.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	a, err := New(Options{
		Domains:      []string{acmeTestDomain},
		DirectoryURL: down.URL + "/directory",
		Storage:      NewRedisStorage(client, "gmgate:acme:", testSealer(t)),
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lock := "gmgate:acme:lock:issue_cert_" + acmeTestDomain
	testwait.For(t, "the order to take its lock", func() bool { return client.Exists(ctx, lock).Val() == 1 })
	a.Stop()
	testwait.For(t, "Stop to release the order's lock", func() bool { return client.Exists(ctx, lock).Val() == 0 })
}

// The ACME account and certificates outlive the rotation of the sealing
// keys that docs/config.md describes (the new key added second, moved
// first, the old one removed): they are not rewritten for months, so a
// manager that starts under the new first key seals them again with it.
func TestRedisStorageKeyRotation(t *testing.T) {
	srv := testredis.Start(t)
	client := srv.Client()
	t.Cleanup(func() { client.Close() })
	const oldKey, newKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff000102030405060708090a0b0c0d0e0f"
	storage := func(keys string) *RedisStorage {
		k, err := sessionstore.ParseKeys(keys, "test")
		if err != nil {
			t.Fatal(err)
		}
		return NewRedisStorage(client, "gmgate:acme:", k)
	}
	ctx := context.Background()
	files := map[string]string{
		"acme/ca/users/ops@example.cn/ops.key":              "account key",
		"certificates/ca/www.example.cn/www.example.cn.crt": "certificate",
		"certificates/ca/www.example.cn/www.example.cn.key": "certificate key",
	}
	before := storage(oldKey)
	for k, v := range files {
		if err := before.Store(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	modified, err := before.Stat(ctx, "acme/ca/users/ops@example.cn/ops.key")
	if err != nil {
		t.Fatal(err)
	}

	// The reload that moves the new key first starts a new manager.
	down := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(down.Close)
	a, err := New(Options{Domains: []string{acmeTestDomain}, DirectoryURL: down.URL + "/directory",
		Storage: storage(newKey + "\n" + oldKey), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}

	after := storage(newKey)
	for k, v := range files {
		testwait.For(t, k+" to open without the old key", func() bool {
			got, err := after.Load(ctx, k)
			return err == nil && string(got) == v
		})
	}
	// Sealing again is not a change: certmagic picks the most recent
	// account by its modification time.
	if info, err := after.Stat(ctx, "acme/ca/users/ops@example.cn/ops.key"); err != nil || !info.Modified.Equal(modified.Modified) {
		t.Fatalf("Stat after sealing again = %+v, %v; want modified %v", info, err, modified.Modified)
	}
	// A value that opens with none of the keys is reported and kept.
	if err := before.Store(ctx, "ocsp/lost", []byte("sealed with a key since removed")); err != nil {
		t.Fatal(err)
	}
	lost := client.HGet(ctx, "gmgate:acme:f:ocsp/lost", "v").Val()
	n, unopened, err := after.Reseal(ctx)
	if err != nil || n != 0 || !slices.Equal(unopened, []string{"gmgate:acme:f:ocsp/lost"}) {
		t.Fatalf("Reseal = %d, %v, %v; want nothing sealed again and the lost value reported", n, unopened, err)
	}
	if client.HGet(ctx, "gmgate:acme:f:ocsp/lost", "v").Val() != lost {
		t.Fatal("a value that does not open was changed")
	}
}

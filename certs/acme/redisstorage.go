package acme

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
)

// Sealer seals the values a shared storage writes, which include the ACME
// account key and the certificates' private keys: Open must be given the
// ad that Seal was.
type Sealer interface {
	Seal(value, ad []byte) ([]byte, error)
	Open(sealed, ad []byte) ([]byte, error)
	// SealedWithFirst reports whether Seal would seal with the key that
	// sealed is sealed with.
	SealedWithFirst(sealed []byte) bool
}

// RedisStorage is a certmagic.Storage in Redis, shared by the replicas of
// a gateway so that one of them obtains a certificate (holding the lock)
// and the others load it. Each value is a hash of its sealed bytes ("v"),
// its size ("s") and its modification time ("m", Unix nanoseconds) under
// prefix + "f:" + key; locks are prefix + "lock:" + name, held with a
// random token and an expiry that the holder keeps extending, so that a
// replica that dies does not hold a lock for more than RedisLockTTL.
type RedisStorage struct {
	client redis.UniversalClient
	prefix string
	sealer Sealer

	mu    sync.Mutex
	locks map[string]*redisLock
}

// RedisLockTTL is how long a lock outlives a holder that stopped
// extending it.
const RedisLockTTL = 30 * time.Second

// redisLockPoll is how often a waiting Lock tries again.
const redisLockPoll = time.Second

type redisLock struct {
	token string
	stop  chan struct{}
	done  chan struct{}
}

var _ certmagic.Storage = (*RedisStorage)(nil)

// NewRedisStorage returns a storage under prefix (such as "gmgate:acme:")
// whose values are sealed by sealer.
func NewRedisStorage(client redis.UniversalClient, prefix string, sealer Sealer) *RedisStorage {
	return &RedisStorage{client: client, prefix: prefix, sealer: sealer, locks: map[string]*redisLock{}}
}

func (s *RedisStorage) fileKey(key string) string { return s.prefix + "f:" + key }

// Store implements certmagic.Storage.
func (s *RedisStorage) Store(ctx context.Context, key string, value []byte) error {
	rk := s.fileKey(key)
	sealed, err := s.sealer.Seal(value, []byte(rk))
	if err != nil {
		return err
	}
	return s.client.HSet(ctx, rk, "v", sealed, "s", len(value), "m", time.Now().UnixNano()).Err()
}

// Load implements certmagic.Storage.
func (s *RedisStorage) Load(ctx context.Context, key string) ([]byte, error) {
	rk := s.fileKey(key)
	sealed, err := s.client.HGet(ctx, rk, "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	value, err := s.sealer.Open(sealed, []byte(rk))
	if err != nil {
		return nil, fmt.Errorf("shared storage: %s: %w", key, err)
	}
	return value, nil
}

// Delete implements certmagic.Storage: key and every key under it.
func (s *RedisStorage) Delete(ctx context.Context, key string) error {
	keys, err := s.scan(ctx, key)
	if err != nil {
		return err
	}
	// One at a time: a cluster keeps the keys on several nodes.
	for _, k := range append(keys, s.fileKey(key)) {
		if err := s.client.Del(ctx, k).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Exists implements certmagic.Storage.
func (s *RedisStorage) Exists(ctx context.Context, key string) bool {
	if n, err := s.client.Exists(ctx, s.fileKey(key)).Result(); err == nil && n > 0 {
		return true
	}
	keys, err := s.scan(ctx, key)
	return err == nil && len(keys) > 0
}

// List implements certmagic.Storage. Without recursive it lists the
// files and directories right under dir; with it, every file under dir.
func (s *RedisStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	keys, err := s.scan(ctx, dir)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fs.ErrNotExist
	}
	seen := map[string]bool{}
	var out []string
	for _, rk := range keys {
		key := strings.TrimPrefix(rk, s.fileKey(""))
		if !recursive {
			rest := strings.TrimPrefix(key, dir+"/")
			if dir == "" {
				rest = key
			}
			first, _, _ := strings.Cut(rest, "/")
			key = path.Join(dir, first)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Stat implements certmagic.Storage.
func (s *RedisStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	vals, err := s.client.HMGet(ctx, s.fileKey(key), "s", "m").Result()
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if vals[0] != nil && vals[1] != nil {
		size, _ := strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
		mod, _ := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
		return certmagic.KeyInfo{Key: key, Modified: time.Unix(0, mod), Size: size, IsTerminal: true}, nil
	}
	keys, err := s.scan(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(keys) == 0 {
		return certmagic.KeyInfo{}, fs.ErrNotExist
	}
	return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
}

// scan returns the Redis keys of the files under dir.
func (s *RedisStorage) scan(ctx context.Context, dir string) ([]string, error) {
	pattern := globEscaper.Replace(s.fileKey(dir))
	if dir != "" {
		pattern += "/"
	}
	pattern += "*"
	var keys []string
	var mu sync.Mutex
	scanNode := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 256).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scanNode(ctx, c) })
	} else {
		err = scanNode(ctx, s.client)
	}
	slices.Sort(keys)
	return slices.Compact(keys), err
}

// globEscaper escapes what SCAN's MATCH reads as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// resealScript replaces a value only while it is the one that was read,
// so that sealing it again never undoes what another replica stored
// meanwhile; its size and modification time stay.
var resealScript = redis.NewScript(`if redis.call("HGET", KEYS[1], "v") == ARGV[1] then return redis.call("HSET", KEYS[1], "v", ARGV[2]) end return 0`)

// Reseal seals again with the first key each value sealed with another,
// and returns how many it sealed again and the Redis keys of those that
// open with none. The ACME account and certificates are rewritten every few
// months at most, so without it they would stop opening once a key
// rotation removes the key that sealed them.
func (s *RedisStorage) Reseal(ctx context.Context) (resealed int, unopened []string, err error) {
	keys, err := s.scan(ctx, "")
	if err != nil {
		return 0, nil, err
	}
	for _, rk := range keys {
		sealed, err := s.client.HGet(ctx, rk, "v").Bytes()
		if errors.Is(err, redis.Nil) || (err == nil && s.sealer.SealedWithFirst(sealed)) {
			continue
		}
		if err != nil {
			return resealed, unopened, err
		}
		value, err := s.sealer.Open(sealed, []byte(rk))
		if err != nil {
			unopened = append(unopened, rk)
			continue
		}
		again, err := s.sealer.Seal(value, []byte(rk))
		clear(value)
		if err != nil {
			return resealed, unopened, err
		}
		n, err := resealScript.Run(ctx, s.client, []string{rk}, sealed, again).Int()
		if err != nil {
			return resealed, unopened, err
		}
		resealed += n
	}
	return resealed, unopened, nil
}

// Unlocking and extending check the token, so that a holder whose lock
// expired never releases or extends another's.
var (
	unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	extendScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
)

// Lock implements certmagic.Locker: it waits until name is free (or its
// holder stopped extending it for RedisLockTTL) or ctx is done.
func (s *RedisStorage) Lock(ctx context.Context, name string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	token := hex.EncodeToString(b[:])
	key := s.prefix + "lock:" + name
	for {
		ok, err := s.client.SetNX(ctx, key, token, RedisLockTTL).Result()
		if err != nil {
			return fmt.Errorf("shared storage: lock %s: %w", name, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(redisLockPoll):
		}
	}
	l := &redisLock{token: token, stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.locks[name] = l
	s.mu.Unlock()
	go func() {
		defer close(l.done)
		t := time.NewTicker(RedisLockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), RedisLockTTL/3)
				_ = extendScript.Run(ctx, s.client, []string{key}, token, RedisLockTTL.Milliseconds()).Err()
				cancel()
			}
		}
	}()
	return nil
}

// Unlock implements certmagic.Locker.
func (s *RedisStorage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	l := s.locks[name]
	delete(s.locks, name)
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("shared storage: unlock %s: not locked here", name)
	}
	close(l.stop)
	<-l.done
	return unlockScript.Run(ctx, s.client, []string{s.prefix + "lock:" + name}, l.token).Err()
}

// String names the storage in certmagic's logs.
func (s *RedisStorage) String() string { return "redis:" + s.prefix }

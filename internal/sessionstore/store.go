// Package sessionstore shares TLCP sessions between gateway replicas
// through Redis: a tlcp.SessionCache with a local cache in front, whose
// sessions are sealed (SM4-GCM, see Keys) before they leave the process and
// expire in Redis with their lifetime. It also derives the TLS session
// ticket keys that replicas share.
//
// A slow or unreachable Redis must cost a full handshake, never a failed
// or a hung one: lookups are bounded by a short timeout and skipped while
// Redis is known to be down, writes go through a bounded queue off the
// handshake, and the store probes Redis in the background until it is
// back.
//
// The package knows nothing of configuration files or Prometheus: the
// proxy passes it a Redis client, the keys and an Observer.
package sessionstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
)

// Lookup results, as reported to Observer.Lookup.
const (
	// LookupLocal is a session found in the local cache: Redis was not
	// asked.
	LookupLocal = "local"
	// LookupHit is a session found in Redis.
	LookupHit = "hit"
	// LookupMiss is a session neither cache has (or one past its
	// lifetime).
	LookupMiss = "miss"
	// LookupError is a lookup that failed or timed out; the handshake
	// goes on as a full one.
	LookupError = "error"
	// LookupInvalid is a value in Redis that does not open with the keys
	// or does not parse.
	LookupInvalid = "invalid"
	// LookupUnavailable is a lookup not sent because Redis is down.
	LookupUnavailable = "unavailable"
)

// Write results, as reported to Observer.Write.
const (
	WriteOK          = "ok"
	WriteError       = "error"
	WriteDropped     = "dropped"     // the queue was full
	WriteUnavailable = "unavailable" // Redis is down: kept locally only
	// WriteRefused is a write Redis answered with a refusal: out of
	// memory (maxmemory reached under the noeviction policy), a read-only
	// replica, or a user without write rights. Redis is up and lookups go
	// on, but the session is kept locally only.
	WriteRefused = "refused"
)

// Observer receives what the store does, for metrics. Its methods are
// called concurrently and must not block.
type Observer interface {
	// Lookup reports a session lookup and how long Redis took to answer
	// it (zero when Redis was not asked).
	Lookup(result string, d time.Duration)
	// Write reports n writes of kind op ("set" or "delete") sent in one
	// round trip of duration d (zero when none was sent).
	Write(op, result string, n int, d time.Duration)
	// Up reports whether Redis answers.
	Up(up bool)
}

type nopObserver struct{}

func (nopObserver) Lookup(string, time.Duration)             {}
func (nopObserver) Write(string, string, int, time.Duration) {}
func (nopObserver) Up(bool)                                  {}

// Defaults of Options.
const (
	DefaultTimeout       = 50 * time.Millisecond
	DefaultWriteTimeout  = time.Second
	DefaultProbeInterval = 500 * time.Millisecond
	DefaultQueue         = 4096
	// logInterval is the least time between two "unreachable" lines.
	logInterval = 30 * time.Second
	// writeBatch bounds the writes sent in one pipeline.
	writeBatch = 128
	// lookupBatch bounds the lookups sent in one pipeline, and
	// lookupSenders the pipelines of lookups in flight at once.
	lookupBatch   = 64
	lookupSenders = 2
)

// Options configure a Store.
type Options struct {
	// Client is the Redis client; the store closes it on Close.
	Client redis.UniversalClient
	// Keys seal the sessions.
	Keys *Keys
	// Prefix starts every Redis key the store writes ("gmgate:").
	Prefix string
	// Timeout bounds a lookup (DefaultTimeout when zero).
	Timeout time.Duration
	// WriteTimeout bounds a batch of writes (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// ProbeInterval is how often a down Redis is tried again
	// (DefaultProbeInterval).
	ProbeInterval time.Duration
	// Queue bounds the writes waiting to be sent (DefaultQueue), more
	// being dropped, and the lookups waiting, more being misses.
	Queue    int
	Logger   *slog.Logger
	Observer Observer
}

// Store is the shared part of the session caches of one process: the
// Redis client, its health and the write queue.
type Store struct {
	client       redis.UniversalClient
	keys         *Keys
	prefix       string
	timeout      time.Duration
	writeTimeout time.Duration
	probeEvery   time.Duration
	log          *slog.Logger
	obs          Observer
	now          func() time.Time

	up      atomic.Bool
	probing atomic.Bool
	writes  chan write
	lookups chan *lookup

	logMu      sync.Mutex
	downSince  time.Time // when the current outage began
	lastLogged time.Time // when "unreachable" was last logged
	downLogged bool      // the current outage was logged
	flaps      int       // outages not logged since lastLogged
	// lastRefusal is when a refused write was last logged, refusals
	// the refused writes since.
	lastRefusal time.Time
	refusals    int

	stop    chan struct{}
	stopped sync.WaitGroup
	closed  atomic.Bool
}

type write struct {
	key   string
	value []byte // nil deletes
	ttl   time.Duration
}

// New starts a store. Redis is taken to be up until a request fails.
func New(opts Options) *Store {
	s := &Store{
		client:       opts.Client,
		keys:         opts.Keys,
		prefix:       opts.Prefix,
		timeout:      opts.Timeout,
		writeTimeout: opts.WriteTimeout,
		probeEvery:   opts.ProbeInterval,
		log:          opts.Logger,
		obs:          opts.Observer,
		now:          time.Now,
		stop:         make(chan struct{}),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	if s.probeEvery <= 0 {
		s.probeEvery = DefaultProbeInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	queue := opts.Queue
	if queue <= 0 {
		queue = DefaultQueue
	}
	s.writes = make(chan write, queue)
	s.lookups = make(chan *lookup, queue)
	s.up.Store(true)
	s.obs.Up(true)
	s.stopped.Add(2 + lookupSenders)
	go s.writer()
	go s.firstProbe()
	for range lookupSenders {
		go s.lookupSender()
	}
	return s
}

// firstProbe finds out at once whether Redis answers lookups, so that an
// outage at start is said before a handshake runs into it.
func (s *Store) firstProbe() {
	defer s.stopped.Done()
	ctx, cancel := context.WithTimeout(context.Background(), max(s.timeout, time.Second))
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.ask(ctx); err != nil && ctx.Err() != context.Canceled {
		s.down(err)
	}
}

// ask sends Redis what a lookup sends, for a key no session has: a PING
// would be answered for a user that may not read sessions, which would
// take the store for up only to find it down at the next lookup.
func (s *Store) ask(ctx context.Context) error {
	err := s.client.Get(ctx, s.prefix+"tlcp:probe").Err()
	if err == redis.Nil {
		return nil
	}
	return err
}

// Close stops the store's goroutines, sends the writes already queued
// (within WriteTimeout) and closes the Redis client.
func (s *Store) Close() {
	s.logMu.Lock()
	if s.closed.Swap(true) {
		s.logMu.Unlock()
		return
	}
	s.logMu.Unlock()
	close(s.stop)
	s.stopped.Wait()
	s.client.Close()
}

// Client returns the store's Redis client.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Keys returns the store's sealing keys.
func (s *Store) Keys() *Keys { return s.keys }

// Up reports whether Redis is taken to be up.
func (s *Store) Up() bool { return s.up.Load() }

// TicketKeys returns the TLS session ticket keys of the listener name
// (see Keys.TicketKeys).
func (s *Store) TicketKeys(name string) [][32]byte { return s.keys.TicketKeys(name) }

// SessionKey returns the Redis key of a TLCP session ID.
func (s *Store) SessionKey(id []byte) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len("tlcp:") + hex.EncodedLen(len(id)))
	b.WriteString(s.prefix)
	b.WriteString("tlcp:")
	if len(id) <= 32 { // a TLCP session ID: no allocation but b's
		var digits [64]byte
		b.Write(digits[:hex.Encode(digits[:], id)])
	} else {
		b.WriteString(hex.EncodeToString(id))
	}
	return b.String()
}

// Cache returns a session cache that answers from local first and from
// Redis next, and writes to both. lifetime is the sessions' lifetime: a
// session is not resumed, from either cache, past CreatedAt + lifetime.
// local should be kept across reloads; the returned cache is cheap.
func (s *Store) Cache(local tlcp.SessionCache, lifetime time.Duration) tlcp.SessionCache {
	return &cache{store: s, local: local, lifetime: lifetime}
}

type cache struct {
	store    *Store
	local    tlcp.SessionCache
	lifetime time.Duration
}

// alive reports whether st is within its lifetime.
func (c *cache) alive(st *tlcp.SessionState) bool {
	return c.lifetime <= 0 || c.store.now().Before(st.CreatedAt.Add(c.lifetime))
}

func (c *cache) Get(id []byte) (*tlcp.SessionState, bool) {
	s := c.store
	if st, ok := c.local.Get(id); ok {
		// A session fetched from Redis was put here later than it was
		// made: the local cache's own expiry runs late for it.
		if c.alive(st) {
			s.obs.Lookup(LookupLocal, 0)
			return st, true
		}
		c.local.Delete(id)
	}
	if len(id) == 0 || len(id) > 32 {
		return nil, false
	}
	if !s.up.Load() {
		s.obs.Lookup(LookupUnavailable, 0)
		return nil, false
	}
	key := s.SessionKey(id)
	start := time.Now()
	sealed, err := s.fetch(key)
	d := time.Since(start)
	switch {
	case err == redis.Nil:
		s.obs.Lookup(LookupMiss, d)
		return nil, false
	case err == errLookupsQueued, err == errStoreClosed:
		s.obs.Lookup(LookupError, 0)
		return nil, false
	case err != nil:
		s.obs.Lookup(LookupError, d)
		s.down(err)
		return nil, false
	}
	plain, err := s.keys.open(sealed, key)
	if err != nil {
		s.obs.Lookup(LookupInvalid, d)
		return nil, false
	}
	st, err := tlcp.ParseSessionState(plain)
	clear(plain)
	if err != nil {
		s.obs.Lookup(LookupInvalid, d)
		return nil, false
	}
	if !c.alive(st) {
		s.obs.Lookup(LookupMiss, d)
		return nil, false
	}
	c.local.Put(id, st)
	s.obs.Lookup(LookupHit, d)
	return st, true
}

func (c *cache) Put(id []byte, st *tlcp.SessionState) {
	c.local.Put(id, st)
	s := c.store
	if len(id) == 0 || len(id) > 32 || st == nil {
		return
	}
	ttl := time.Duration(0)
	if c.lifetime > 0 {
		if ttl = st.CreatedAt.Add(c.lifetime).Sub(s.now()); ttl <= 0 {
			return
		}
	}
	if !s.up.Load() {
		s.obs.Write("set", WriteUnavailable, 1, 0)
		return
	}
	plain, err := st.Marshal()
	if err != nil {
		return
	}
	key := s.SessionKey(id)
	sealed, err := s.keys.seal(plain, key)
	clear(plain)
	if err != nil {
		s.obs.Write("set", WriteError, 1, 0)
		return
	}
	s.enqueue(write{key: key, value: sealed, ttl: ttl})
}

func (c *cache) Delete(id []byte) {
	c.local.Delete(id)
	s := c.store
	if len(id) == 0 || len(id) > 32 {
		return
	}
	if !s.up.Load() {
		s.obs.Write("delete", WriteUnavailable, 1, 0)
		return
	}
	s.enqueue(write{key: s.SessionKey(id)})
}

// Lookups go to Redis in pipelines: a lookup that comes while
// lookupSenders pipelines are in flight waits for the next one, with the
// others that came meanwhile. Under load, one round trip (a write and a
// read on each side, and a wake-up of Redis) then answers many lookups
// instead of one each; alone, a lookup goes at once. Each waits at most
// the store's timeout, queueing included.

// lookup is one session lookup on its way to Redis.
type lookup struct {
	key string
	// done receives the answer; it has room for it, so that an answer
	// nobody waits for any more does not block.
	done chan lookupResult
}

type lookupResult struct {
	value []byte
	err   error
}

var lookupPool = sync.Pool{New: func() any { return &lookup{done: make(chan lookupResult, 1)} }}

// errLookupsQueued is a lookup not sent because too many were waiting.
var errLookupsQueued = errors.New("too many session lookups waiting for Redis")

// errStoreClosed is a lookup on a store closed by a reload or shutdown.
var errStoreClosed = errors.New("session store closed")

// fetch returns the value of key in Redis, redis.Nil when there is none.
func (s *Store) fetch(key string) ([]byte, error) {
	if s.closed.Load() {
		// No sender is left to answer.
		return nil, errStoreClosed
	}
	l := lookupPool.Get().(*lookup)
	l.key = key
	select {
	case s.lookups <- l:
	default:
		l.key = ""
		lookupPool.Put(l)
		return nil, errLookupsQueued
	}
	t := time.NewTimer(s.timeout)
	select {
	case r := <-l.done:
		t.Stop()
		l.key = ""
		lookupPool.Put(l)
		return r.value, r.err
	case <-t.C:
		// The answer may still come, to l's channel: l is not reused.
		return nil, fmt.Errorf("no answer from Redis within the session lookup timeout (%s)", s.timeout)
	}
}

// lookupSender sends the waiting lookups, in pipelines of up to
// lookupBatch.
func (s *Store) lookupSender() {
	defer s.stopped.Done()
	batch := make([]*lookup, 0, lookupBatch)
	cmds := make([]*redis.StringCmd, 0, lookupBatch)
	for {
		select {
		case <-s.stop:
			return
		case l := <-s.lookups:
			batch = drain(s.lookups, append(batch[:0], l), lookupBatch)
			cmds = s.get(batch, cmds[:0])
			clear(batch)
			clear(cmds)
		}
	}
}

// get looks up the keys of batch in one round trip and answers each.
func (s *Store) get(batch []*lookup, cmds []*redis.StringCmd) []*redis.StringCmd {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if len(batch) == 1 {
		v, err := s.client.Get(ctx, batch[0].key).Bytes()
		batch[0].done <- lookupResult{v, err}
		return cmds
	}
	pipe := s.client.Pipeline()
	for _, l := range batch {
		cmds = append(cmds, pipe.Get(ctx, l.key))
	}
	_, _ = pipe.Exec(ctx) // each command has its own error
	for i, l := range batch {
		v, err := cmds[i].Bytes()
		l.done <- lookupResult{v, err}
	}
	return cmds
}

// enqueue hands w to the writer, or drops it when the queue is full: a
// session that is not shared costs a full handshake elsewhere, a blocked
// handshake costs more.
func (s *Store) enqueue(w write) {
	if s.closed.Load() {
		return
	}
	select {
	case s.writes <- w:
	default:
		s.obs.Write(opOf(w), WriteDropped, 1, 0)
	}
}

func opOf(w write) string {
	if w.value == nil {
		return "delete"
	}
	return "set"
}

// writer sends the queued writes, in pipelines of up to writeBatch.
func (s *Store) writer() {
	defer s.stopped.Done()
	batch := make([]write, 0, writeBatch)
	for {
		select {
		case w := <-s.writes:
			batch = s.fill(append(batch[:0], w))
			if !s.up.Load() {
				for _, w := range batch {
					s.obs.Write(opOf(w), WriteUnavailable, 1, 0)
				}
				continue
			}
			s.send(batch)
		case <-s.stop:
			// Send what is queued, then stop.
			for {
				batch = s.fill(batch[:0])
				if len(batch) == 0 || !s.up.Load() {
					return
				}
				s.send(batch)
			}
		}
	}
}

// fill adds queued writes to batch, up to writeBatch, without waiting.
func (s *Store) fill(batch []write) []write { return drain(s.writes, batch, writeBatch) }

// drain adds to batch what ch holds, up to n in all, without waiting.
func drain[T any](ch <-chan T, batch []T, n int) []T {
	for len(batch) < n {
		select {
		case v := <-ch:
			batch = append(batch, v)
		default:
			return batch
		}
	}
	return batch
}

func (s *Store) send(batch []write) {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	start := time.Now()
	pipe := s.client.Pipeline()
	sets, dels := 0, 0
	for _, w := range batch {
		if w.value == nil {
			pipe.Del(ctx, w.key)
			dels++
		} else {
			pipe.Set(ctx, w.key, w.value, w.ttl)
			sets++
		}
	}
	cmds, err := pipe.Exec(ctx)
	d := time.Since(start)
	reason := ""
	if err != nil {
		reason = refusedAll(cmds)
	}
	if err != nil && reason == "" {
		s.down(err)
		// The round trip is reported once, with the first kind.
		if sets > 0 {
			s.obs.Write("set", WriteError, sets, d)
			d = 0
		}
		if dels > 0 {
			s.obs.Write("delete", WriteError, dels, d)
		}
		return
	}
	// Redis answered every write, and may have refused some.
	var n [2][2]int // [set, delete][ok, refused]
	var refusal error
	for i, c := range cmds {
		op, r := 0, 0
		if batch[i].value == nil {
			op = 1
		}
		if c.Err() != nil {
			r, refusal = 1, c.Err()
		}
		n[op][r]++
	}
	for op, name := range [2]string{"set", "delete"} {
		for r, result := range [2]string{WriteOK, WriteRefused} {
			if n[op][r] > 0 {
				s.obs.Write(name, result, n[op][r], d)
				d = 0
			}
		}
	}
	if refusal != nil {
		s.refused(reason, refusal, n[0][1]+n[1][1])
	}
}

// refusedAll reports why Redis refused writes of a pipeline when it
// answered every command and each error is a refusal (see refusalOf); it
// returns "" when Redis refused nothing or failed otherwise.
func refusedAll(cmds []redis.Cmder) string {
	reason := ""
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			r := refusalOf(err)
			if r == "" {
				return ""
			}
			reason = r
		}
	}
	return reason
}

// refusalOf says why Redis refused a write it answered, with the fix,
// when the refusal leaves it up for lookups: out of memory, a read-only
// replica (which still answers lookups) or a user without write rights.
// Any other error is "": Redis is taken for down.
func refusalOf(err error) string {
	switch {
	case redis.IsOOMError(err):
		return "Redis is out of memory (raise its maxmemory, or set maxmemory-policy to volatile-ttl so that the soonest to expire make room)"
	case redis.HasErrorPrefix(err, "READONLY"):
		return "the Redis it writes to is a read-only replica (name its master in addrs, or its Sentinels with master_name)"
	case redis.HasErrorPrefix(err, "NOPERM"):
		return "the Redis user may not write sessions (grant it +@write on keys under the key prefix)"
	}
	return ""
}

// refused logs, at most once per logInterval, that Redis refuses the
// sessions written to it: it stays up, as its lookups go on.
func (s *Store) refused(reason string, cause error, n int) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.refusals += n
	now := s.now()
	if !s.lastRefusal.IsZero() && now.Sub(s.lastRefusal) < logInterval {
		return
	}
	s.log.Warn("session store refuses new sessions: "+reason+"; sessions made here are not shared until it takes them again; lookups and handshakes go on",
		"cause", cause.Error(), "refused_writes", s.refusals)
	s.lastRefusal, s.refusals = now, 0
}

// down marks Redis down after a failed request and starts probing it.
func (s *Store) down(cause error) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.closed.Load() || !s.up.CompareAndSwap(true, false) {
		return
	}
	s.obs.Up(false)
	now := s.now()
	s.downSince = now
	if s.lastLogged.IsZero() || now.Sub(s.lastLogged) >= logInterval {
		args := []any{"cause", cause.Error(), "retry_every", s.probeEvery.String()}
		if s.flaps > 0 {
			args = append(args, "outages_not_logged", s.flaps)
		}
		msg := "session store unreachable: sessions are not shared until it is back; handshakes go on"
		if redis.HasErrorPrefix(cause, "NOPERM") {
			msg = "session store refuses lookups: the Redis user may not read sessions (grant it +@read on keys under the key prefix); sessions are not shared until it may; handshakes go on"
		}
		s.log.Warn(msg, args...)
		s.lastLogged, s.downLogged, s.flaps = now, true, 0
	} else {
		s.downLogged = false
		s.flaps++
	}
	if s.probing.CompareAndSwap(false, true) {
		s.stopped.Add(1)
		go s.probe()
	}
}

// probe asks Redis until it answers a lookup, then marks it up.
func (s *Store) probe() {
	defer s.stopped.Done()
	t := time.NewTicker(s.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.probing.Store(false)
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(s.timeout, 250*time.Millisecond))
		err := s.ask(ctx)
		cancel()
		if err != nil {
			continue
		}
		s.logMu.Lock()
		if s.downLogged {
			s.log.Info("session store reachable again: sessions are shared", "down_for", s.now().Sub(s.downSince).Round(time.Millisecond).String())
		}
		// No longer probing before up: a failure right after this
		// starts a new probe.
		s.probing.Store(false)
		s.up.Store(true)
		s.obs.Up(true)
		s.logMu.Unlock()
		return
	}
}

package tlcp

import (
	"container/list"
	"errors"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"
)

// Defaults of the server session cache used when Config.SessionCache is
// nil.
const (
	DefaultSessionCacheSize = 20000
	DefaultSessionLifetime  = 12 * time.Hour
)

// SessionState is what a server keeps of a session for session-ID
// resumption. Marshal and ParseSessionState turn it into bytes and back so
// that a cache shared between processes can store it.
type SessionState struct {
	Version     uint16
	CipherSuite uint16
	// MasterSecret is secret: whoever has it can read the session's traffic.
	MasterSecret []byte
	// PeerCertificates are the client's certificates (DER), if any.
	PeerCertificates [][]byte
	CreatedAt        time.Time
	ServerName       string

	// verifiedChains survive only in memory.
	verifiedChains [][]*smx509.Certificate
}

const sessionStateVersion = 1

// Marshal encodes the session (secrets included) for a shared cache.
func (s *SessionState) Marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(sessionStateVersion)
	b.AddUint16(s.Version)
	b.AddUint16(s.CipherSuite)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.MasterSecret) })
	b.AddUint64(uint64(s.CreatedAt.Unix()))
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.ServerName)) })
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range s.PeerCertificates {
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
		}
	})
	return b.Bytes()
}

// ParseSessionState decodes what Marshal produced.
func ParseSessionState(data []byte) (*SessionState, error) {
	s := cryptobyte.String(data)
	var v uint8
	var st SessionState
	var master, name, certs cryptobyte.String
	var created uint64
	if !s.ReadUint8(&v) || v != sessionStateVersion ||
		!s.ReadUint16(&st.Version) || !s.ReadUint16(&st.CipherSuite) ||
		!s.ReadUint8LengthPrefixed(&master) || len(master) != masterSecretLength ||
		!s.ReadUint64(&created) || !s.ReadUint16LengthPrefixed(&name) ||
		!s.ReadUint24LengthPrefixed(&certs) || !s.Empty() {
		return nil, errors.New("tlcp: malformed session state")
	}
	for !certs.Empty() {
		var c cryptobyte.String
		if !certs.ReadUint24LengthPrefixed(&c) || c.Empty() {
			return nil, errors.New("tlcp: malformed session state")
		}
		st.PeerCertificates = append(st.PeerCertificates, []byte(c))
	}
	st.MasterSecret = []byte(master)
	st.ServerName = string(name)
	st.CreatedAt = time.Unix(int64(created), 0)
	return &st, nil
}

// SessionCache stores server sessions by session ID. Implementations must
// be safe for concurrent use and must not return sessions past their
// lifetime.
type SessionCache interface {
	Get(sessionID []byte) (*SessionState, bool)
	Put(sessionID []byte, s *SessionState)
	Delete(sessionID []byte)
}

// ClientSessionState is what a client keeps of a session to resume it.
type ClientSessionState struct {
	sessionID          []byte
	cipherSuite        uint16
	masterSecret       []byte
	serverCertificates []*smx509.Certificate
	verifiedChains     [][]*smx509.Certificate
	createdAt          time.Time
}

// ClientSessionCache stores client sessions by server (its name, or its
// address when no name is set). Put with a nil state deletes.
type ClientSessionCache interface {
	Get(key string) (*ClientSessionState, bool)
	Put(key string, cs *ClientSessionState)
}

// lru is a bounded map with least-recently-used eviction and an optional
// lifetime per entry.
type lru[V any] struct {
	mu       sync.Mutex
	capacity int
	lifetime time.Duration
	now      func() time.Time
	ll       *list.List
	m        map[string]*list.Element
}

type lruEntry[V any] struct {
	key     string
	value   V
	expires time.Time
}

func newLRU[V any](capacity int, lifetime time.Duration) *lru[V] {
	if capacity <= 0 {
		capacity = DefaultSessionCacheSize
	}
	return &lru[V]{capacity: capacity, lifetime: lifetime, now: time.Now, ll: list.New(), m: make(map[string]*list.Element)}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	e, ok := c.m[key]
	if !ok {
		return zero, false
	}
	ent := e.Value.(*lruEntry[V])
	if !ent.expires.IsZero() && c.now().After(ent.expires) {
		c.ll.Remove(e)
		delete(c.m, key)
		return zero, false
	}
	c.ll.MoveToFront(e)
	return ent.value, true
}

func (c *lru[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var expires time.Time
	if c.lifetime > 0 {
		expires = c.now().Add(c.lifetime)
	}
	if e, ok := c.m[key]; ok {
		ent := e.Value.(*lruEntry[V])
		ent.value, ent.expires = v, expires
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(&lruEntry[V]{key: key, value: v, expires: expires})
	for c.ll.Len() > c.capacity {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*lruEntry[V]).key)
	}
}

func (c *lru[V]) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.Remove(e)
		delete(c.m, key)
	}
}

type lruClientSessionCache struct{ c *lru[*ClientSessionState] }

// NewLRUClientSessionCache returns a ClientSessionCache holding at most
// capacity sessions (64 when capacity <= 0) for at most lifetime each (no
// limit when lifetime <= 0).
func NewLRUClientSessionCache(capacity int, lifetime time.Duration) ClientSessionCache {
	if capacity <= 0 {
		capacity = 64
	}
	return &lruClientSessionCache{c: newLRU[*ClientSessionState](capacity, lifetime)}
}

func (l *lruClientSessionCache) Get(key string) (*ClientSessionState, bool) { return l.c.get(key) }

func (l *lruClientSessionCache) Put(key string, cs *ClientSessionState) {
	if cs == nil {
		l.c.remove(key)
		return
	}
	l.c.put(key, cs)
}

package tlcp

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm3"
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
// that a cache shared between processes can store it; such a cache must
// store what Marshal returns, which also carries what the session is bound
// to (see Config.SessionContext), or none of its sessions resumes. It must
// also keep what it stores from being read or changed by others (sealed,
// say): a resumption trusts the master secret, and the verified chains of
// the client's certificates, which it checks against the clock and
// ClientCAs without verifying their signatures again.
//
// The slices of a state handed to or returned by a SessionCache must not
// be modified.
type SessionState struct {
	Version     uint16
	CipherSuite uint16
	// MasterSecret is secret: whoever has it can read the session's traffic.
	MasterSecret []byte
	// PeerCertificates are the client's certificates (DER), if any. Only
	// verified certificates are kept, and a session whose certificates
	// exceed maxSessionCertBytes is not cached.
	PeerCertificates [][]byte
	CreatedAt        time.Time
	ServerName       string

	// binding is the digest of what the session was made under (see
	// serverHandshakeState.sessionBinding); a handshake under anything
	// else does not resume it.
	binding [sessionBindingSize]byte
	// verified is set when PeerCertificates were verified.
	verified bool
	// chains are the verified chains of PeerCertificates. Marshal keeps
	// their structure (which certificate issued which); a resumption
	// checks them against the clock and ClientCAs of the moment, and
	// verifies the certificates again only without them.
	chains []sessionChain
}

const sessionBindingSize = 32

// Bounds of the client certificates a cached session keeps, so that a
// cached session costs at most about 8 KiB however large the
// certificates a client sends.
const (
	maxSessionCertBytes = 6 << 10
	maxSessionCerts     = 8
	maxSessionChains    = 4
)

// sessionChain is a verified chain of a session's client certificate,
// kept without copies of certificates: each link is one of the session's
// PeerCertificates (by index) or, when peer < 0, a certificate of the
// ClientCAs pool the chain was verified against: shared with the pool, or
// in a parsed session only its digest, found again in knownCAs.
type sessionChain []chainLink

type chainLink struct {
	peer int
	ca   *smx509.Certificate
	sum  caDigest
}

// maxChainLinks bounds the links of a parsed chain.
const maxChainLinks = 8

// sessionChains records verified chains as links to peer, the client's
// certificates in PeerCertificates order.
func sessionChains(verified [][]*smx509.Certificate, peer []*smx509.Certificate) []sessionChain {
	// A few chains are plenty to find one that still holds.
	verified = verified[:min(len(verified), maxSessionChains)]
	out := make([]sessionChain, 0, len(verified))
	for _, chain := range verified {
		if len(chain) == 0 || len(chain) > maxChainLinks || chain[0] != peer[0] {
			// Not one Marshal keeps: a resumption verifies again.
			return nil
		}
		sc := make(sessionChain, len(chain))
		for i, c := range chain {
			sc[i] = chainLink{peer: slices.Index(peer, c)}
			if sc[i].peer < 0 {
				sc[i].ca, sc[i].sum = c, knownCAs.digest(c)
			}
		}
		out = append(out, sc)
	}
	return out
}

// chain rebuilds a chain with peer, the parsed PeerCertificates; nil when
// a link points past them or names a CA this process does not know.
func (sc sessionChain) chain(peer []*smx509.Certificate) []*smx509.Certificate {
	chain := make([]*smx509.Certificate, len(sc))
	for i, l := range sc {
		switch {
		case l.peer < 0 && l.ca != nil:
			chain[i] = l.ca
		case l.peer < 0:
			if chain[i] = knownCAs.lookup(l.sum); chain[i] == nil {
				return nil
			}
		case l.peer < len(peer):
			chain[i] = peer[l.peer]
		default:
			return nil
		}
	}
	return chain
}

// bindingMemo keeps the binding of one (ClientCAs, certificate) pair: a
// Config's Certificates, or what GetCertificate returns, rarely change.
type bindingMemo struct {
	pool *smx509.CertPool
	cert *Certificate
	sum  [sessionBindingSize]byte
}

// sessionBinding is the SM3 digest of what a session made under c with the
// server certificate cert is bound to: SessionContext, the client
// certificate policy (ClientAuth, AcceptServerAuthClientCerts), the
// subjects of ClientCAs and cert's signing and encryption certificates.
// Changing a CA in ClientCAs for another of the same subject is caught when
// the session's chain is checked again on resumption.
func (c *Config) sessionBinding(cert *Certificate) [sessionBindingSize]byte {
	if m := c.bindingMemo.Load(); m != nil && m.pool == c.ClientCAs && m.cert == cert {
		return m.sum
	}
	h := sm3.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("tlcp session binding"))
	field([]byte(c.SessionContext))
	policy := []byte{byte(c.ClientAuth), 0}
	if c.AcceptServerAuthClientCerts {
		policy[1] = 1
	}
	field(policy)
	if c.ClientCAs == nil {
		field([]byte("system roots"))
	} else {
		// Subjects lists what the caller added to the pool (for a copy of
		// the system pool, not the system roots, which the chain check on
		// resumption covers); their order does not matter.
		//lint:ignore SA1019 the added subjects are what is wanted here
		subjects := c.ClientCAs.Subjects()
		slices.SortFunc(subjects, bytes.Compare)
		field([]byte("client CAs"))
		for _, subject := range subjects {
			field(subject)
		}
	}
	field(cert.SignCertificate[0])
	field(cert.EncCertificate[0])
	var sum [sessionBindingSize]byte
	h.Sum(sum[:0])
	c.bindingMemo.Store(&bindingMemo{pool: c.ClientCAs, cert: cert, sum: sum})
	return sum
}

// sessionCertsFit reports whether certs are within what a session keeps.
func sessionCertsFit(certs [][]byte) bool {
	if len(certs) > maxSessionCerts {
		return false
	}
	n := 0
	for _, c := range certs {
		n += len(c)
	}
	return n <= maxSessionCertBytes
}

// sessionStateVersion 2 added the binding and the verified flag, 3 the
// chains.
const sessionStateVersion = 3

// Marshal encodes the session (secrets included) for a shared cache.
func (s *SessionState) Marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(sessionStateVersion)
	b.AddUint16(s.Version)
	b.AddUint16(s.CipherSuite)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.MasterSecret) })
	b.AddUint64(uint64(s.CreatedAt.Unix()))
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.ServerName)) })
	b.AddBytes(s.binding[:])
	var flags uint8
	if s.verified {
		flags |= 1
	}
	b.AddUint8(flags)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range s.PeerCertificates {
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
		}
	})
	// Each chain: its links, each the index of a peer certificate, or
	// 0xff and the digest of a CA certificate.
	b.AddUint8(uint8(len(s.chains)))
	for _, sc := range s.chains {
		b.AddUint8(uint8(len(sc)))
		for _, l := range sc {
			if l.peer >= 0 {
				b.AddUint8(uint8(l.peer))
				continue
			}
			b.AddUint8(caLink)
			b.AddBytes(l.sum[:])
		}
	}
	return b.Bytes()
}

// caLink marks a CA link of a marshaled chain.
const caLink = 0xff

var errMalformedSession = errors.New("tlcp: malformed session state")

// ParseSessionState decodes what Marshal produced.
func ParseSessionState(data []byte) (*SessionState, error) {
	malformed := errMalformedSession
	s := cryptobyte.String(data)
	var v, flags uint8
	var st SessionState
	var master, name, binding, certs cryptobyte.String
	var created uint64
	if !s.ReadUint8(&v) || v != sessionStateVersion ||
		!s.ReadUint16(&st.Version) || !s.ReadUint16(&st.CipherSuite) ||
		!s.ReadUint8LengthPrefixed(&master) || len(master) != masterSecretLength ||
		!s.ReadUint64(&created) || !s.ReadUint16LengthPrefixed(&name) || len(name) > maxServerNameLen ||
		!s.ReadBytes((*[]byte)(&binding), sessionBindingSize) || !s.ReadUint8(&flags) || flags > 1 ||
		!s.ReadUint24LengthPrefixed(&certs) {
		return nil, malformed
	}
	for !certs.Empty() {
		var c cryptobyte.String
		if !certs.ReadUint24LengthPrefixed(&c) || c.Empty() || len(st.PeerCertificates) == maxSessionCerts {
			return nil, malformed
		}
		st.PeerCertificates = append(st.PeerCertificates, bytes.Clone(c))
	}
	st.verified = flags&1 != 0
	if st.verified != (len(st.PeerCertificates) > 0) || !sessionCertsFit(st.PeerCertificates) {
		return nil, malformed
	}
	var nChains uint8
	if !s.ReadUint8(&nChains) || nChains > maxSessionChains || (nChains > 0 && !st.verified) {
		return nil, malformed
	}
	for range nChains {
		var nLinks uint8
		if !s.ReadUint8(&nLinks) || nLinks == 0 || nLinks > maxChainLinks {
			return nil, malformed
		}
		sc := make(sessionChain, nLinks)
		for i := range sc {
			// A chain starts with the signing certificate, the first.
			var peer uint8
			if !s.ReadUint8(&peer) || (i == 0 && peer != 0) {
				return nil, malformed
			}
			if peer != caLink {
				if int(peer) >= len(st.PeerCertificates) {
					return nil, malformed
				}
				sc[i].peer = int(peer)
				continue
			}
			sc[i].peer = -1
			if !s.CopyBytes(sc[i].sum[:]) {
				return nil, malformed
			}
		}
		st.chains = append(st.chains, sc)
	}
	if !s.Empty() {
		return nil, malformed
	}
	st.MasterSecret = bytes.Clone(master)
	st.ServerName = string(name)
	st.CreatedAt = time.Unix(int64(created), 0)
	copy(st.binding[:], binding)
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
	// clientCertificate is the signing certificate the client presented
	// (DER), nil when it presented none.
	clientCertificate []byte
}

// ClientCertificate returns the signing certificate (DER) the client
// presented in the handshake that made the session, nil when it presented
// none. A resumption presents it again, whatever the client's
// configuration holds by then: a cache that keeps sessions per client
// identity files a session under this one.
func (s *ClientSessionState) ClientCertificate() []byte { return s.clientCertificate }

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

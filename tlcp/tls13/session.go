package tls13

import (
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmgate/gmgate/tlcp"
)

// SessionState is what a server keeps of a session to resume it from a
// ticket. Marshal and ParseSessionState turn it into bytes and back, for a
// SessionCache shared between processes; such a cache must keep what it
// stores from being read or changed by others (sealed, as the shared
// session store does): whoever has the PSK can resume the session.
type SessionState struct {
	CipherSuite uint16
	// PSK is the resumption PSK of the ticket: secret.
	PSK       []byte
	CreatedAt time.Time
	// Lifetime is how long after CreatedAt the session resumes.
	Lifetime time.Duration
	// PeerCertificates are the client's certificates (DER) when it
	// authenticated; checked again on resumption.
	PeerCertificates [][]byte
	ServerName       string
	ALPN             string
	// Verified is set when PeerCertificates were verified.
	Verified bool
	// Binding is the digest of what the session was made under (see
	// Config.sessionBinding); no handshake under anything else resumes
	// it.
	Binding [32]byte
}

// SessionCache keeps server sessions by ticket identity. Implementations
// must be safe for concurrent use.
type SessionCache interface {
	Get(ticket []byte) (*SessionState, bool)
	Put(ticket []byte, s *SessionState)
	Delete(ticket []byte)
}

const sessionStateVersion = 1

// Bounds of what a session keeps of client certificates.
const (
	maxSessionCerts     = 8
	maxSessionCertBytes = 8 << 10
	maxTicketLabel      = 1 << 14
)

// Marshal encodes the session (secrets included).
func (s *SessionState) Marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(sessionStateVersion)
	b.AddUint16(s.CipherSuite)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.PSK) })
	b.AddUint64(uint64(s.CreatedAt.Unix()))
	b.AddUint32(uint32(s.Lifetime / time.Second))
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.ServerName)) })
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.ALPN)) })
	flags := uint8(0)
	if s.Verified {
		flags = 1
	}
	b.AddUint8(flags)
	b.AddBytes(s.Binding[:])
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range s.PeerCertificates {
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
		}
	})
	return b.Bytes()
}

var errMalformedSession = errors.New("tls13: malformed session state")

// ParseSessionState decodes what Marshal produced.
func ParseSessionState(data []byte) (*SessionState, error) {
	s := cryptobyte.String(data)
	var v, flags uint8
	var st SessionState
	var psk, name, alpn, certs cryptobyte.String
	var created uint64
	var lifetime uint32
	var binding []byte
	if !s.ReadUint8(&v) || v != sessionStateVersion || !s.ReadUint16(&st.CipherSuite) ||
		!s.ReadUint8LengthPrefixed(&psk) || len(psk) != hashLen ||
		!s.ReadUint64(&created) || !s.ReadUint32(&lifetime) ||
		!s.ReadUint16LengthPrefixed(&name) || len(name) > 255 ||
		!s.ReadUint8LengthPrefixed(&alpn) || !s.ReadUint8(&flags) || flags > 1 ||
		!s.ReadBytes(&binding, 32) || !s.ReadUint24LengthPrefixed(&certs) || !s.Empty() ||
		len(certs) > maxSessionCertBytes+3*maxSessionCerts {
		return nil, errMalformedSession
	}
	for !certs.Empty() {
		var c cryptobyte.String
		if !certs.ReadUint24LengthPrefixed(&c) || c.Empty() || len(st.PeerCertificates) == maxSessionCerts {
			return nil, errMalformedSession
		}
		st.PeerCertificates = append(st.PeerCertificates, bytes.Clone(c))
	}
	if cipherSuiteByID(st.CipherSuite) == nil || created > 1<<62 {
		return nil, errMalformedSession
	}
	st.PSK = bytes.Clone(psk)
	st.CreatedAt = time.Unix(int64(created), 0)
	st.Lifetime = time.Duration(lifetime) * time.Second
	st.ServerName = string(name)
	st.ALPN = string(alpn)
	st.Verified = flags == 1
	copy(st.Binding[:], binding)
	return &st, nil
}

// sessionBinding is the SM3 digest of what a session made under c with
// the server certificate cert is bound to: SessionContext, the client
// certificate policy, the subjects of ClientCAs and the server's
// certificate. Tickets of a laxer configuration (a clone, a reload, a
// site that does not ask for client certificates) do not resume under a
// stricter one.
func (c *Config) sessionBinding(cert *Certificate) [32]byte {
	h := sm3.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("tls13 session binding"))
	field([]byte(c.SessionContext))
	policy := []byte{byte(c.ClientAuth), 0}
	if c.AcceptServerAuthClientCerts {
		policy[1] = 1
	}
	field(policy)
	if c.ClientCAs == nil {
		field([]byte("system roots"))
	} else {
		//lint:ignore SA1019 the subjects the caller added are what is wanted
		subjects := c.ClientCAs.Subjects()
		slices.SortFunc(subjects, bytes.Compare)
		field([]byte("client CAs"))
		for _, s := range subjects {
			field(s)
		}
	}
	if cert != nil && len(cert.Certificate) > 0 {
		field(cert.Certificate[0])
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Self-contained tickets: name (8) || nonce (12) || SM4-GCM(state).
const (
	ticketNameLen  = 8
	ticketNonceLen = 12
)

type ticketKey struct {
	name [ticketNameLen]byte
	aead cipher.AEAD
}

func newTicketKey(secret [32]byte) (ticketKey, error) {
	var k ticketKey
	m := hmac.New(sm3.New, secret[:])
	m.Write([]byte("tls13 ticket name"))
	copy(k.name[:], m.Sum(nil))
	m = hmac.New(sm3.New, secret[:])
	m.Write([]byte("tls13 ticket key"))
	var err error
	k.aead, err = tlcp.NewSM4GCM(m.Sum(nil)[:16])
	return k, err
}

// ticketKeys keeps the derived keys of the last key list a Config used.
var ticketKeyMemo struct {
	sync.Mutex
	secrets [][32]byte
	keys    []ticketKey
}

func (c *Config) ticketKeys() ([]ticketKey, error) {
	secrets := c.SessionTicketKeys
	if len(secrets) == 0 {
		secrets = [][32]byte{c.defaultTicketKey()}
	}
	ticketKeyMemo.Lock()
	defer ticketKeyMemo.Unlock()
	if slices.Equal(secrets, ticketKeyMemo.secrets) {
		return ticketKeyMemo.keys, nil
	}
	keys := make([]ticketKey, 0, len(secrets))
	for _, s := range secrets {
		k, err := newTicketKey(s)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	ticketKeyMemo.secrets = slices.Clone(secrets)
	ticketKeyMemo.keys = keys
	return keys, nil
}

// issueTicket turns a session into a ticket identity: a cache key when
// the Config has a SessionCache, else the sealed session.
func (c *Config) issueTicket(st *SessionState) ([]byte, error) {
	if c.SessionCache != nil {
		id := make([]byte, 32)
		if _, err := io.ReadFull(c.rand(), id); err != nil {
			return nil, err
		}
		c.SessionCache.Put(id, st)
		return id, nil
	}
	plain, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	keys, err := c.ticketKeys()
	if err != nil {
		return nil, err
	}
	k := keys[0]
	out := make([]byte, ticketNameLen+ticketNonceLen, ticketNameLen+ticketNonceLen+len(plain)+tagLen)
	copy(out, k.name[:])
	if _, err := io.ReadFull(c.rand(), out[ticketNameLen:]); err != nil {
		return nil, err
	}
	out = k.aead.Seal(out, out[ticketNameLen:], plain, out[:ticketNameLen])
	clear(plain)
	return out, nil
}

// openTicket returns the session a ticket names, if any.
func (c *Config) openTicket(label []byte) *SessionState {
	if c.SessionCache != nil {
		st, ok := c.SessionCache.Get(label)
		if !ok {
			return nil
		}
		return st
	}
	if len(label) < ticketNameLen+ticketNonceLen+tagLen || len(label) > maxTicketLabel {
		return nil
	}
	keys, err := c.ticketKeys()
	if err != nil {
		return nil
	}
	for _, k := range keys {
		if !hmac.Equal(k.name[:], label[:ticketNameLen]) {
			continue
		}
		plain, err := k.aead.Open(nil, label[ticketNameLen:ticketNameLen+ticketNonceLen], label[ticketNameLen+ticketNonceLen:], label[:ticketNameLen])
		if err != nil {
			return nil
		}
		st, err := ParseSessionState(plain)
		clear(plain)
		if err != nil {
			return nil
		}
		return st
	}
	return nil
}

// ClientSessionState is what a client keeps of a ticket.
type ClientSessionState struct {
	ticket      []byte
	psk         []byte
	cipherSuite uint16
	receivedAt  time.Time
	lifetime    time.Duration
	ageAdd      uint32
	serverCerts []*smx509.Certificate
	verified    [][]*smx509.Certificate
	alpn        string
}

// ClientSessionCache keeps client sessions by server. Implementations must
// be safe for concurrent use.
type ClientSessionCache interface {
	Get(key string) (*ClientSessionState, bool)
	// Put stores a session; a nil one removes the key.
	Put(key string, cs *ClientSessionState)
}

type lruClientCache struct {
	mu       sync.Mutex
	capacity int
	m        map[string]*ClientSessionState
	order    []string
}

// NewLRUClientSessionCache returns a ClientSessionCache of at most
// capacity servers (64 when capacity <= 0), the oldest dropped first.
func NewLRUClientSessionCache(capacity int) ClientSessionCache {
	if capacity <= 0 {
		capacity = 64
	}
	return &lruClientCache{capacity: capacity, m: make(map[string]*ClientSessionState)}
}

func (l *lruClientCache) Get(key string) (*ClientSessionState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs, ok := l.m[key]
	return cs, ok
}

func (l *lruClientCache) Put(key string, cs *ClientSessionState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.order, key); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
	if cs == nil {
		delete(l.m, key)
		return
	}
	if len(l.order) >= l.capacity {
		delete(l.m, l.order[0])
		l.order = l.order[1:]
	}
	l.m[key] = cs
	l.order = append(l.order, key)
}

// storeTicket keeps a ticket the server sent after the handshake. The
// caller holds c.in.
func (c *Conn) storeTicket(m *newSessionTicketMsg) {
	cache := c.config.ClientSessionCache
	if cache == nil || c.config.SessionTicketsDisabled || c.resumptionSecret == nil {
		return
	}
	if m.lifetime == 0 {
		cache.Put(c.ticketKey, nil)
		return
	}
	lifetime := min(time.Duration(m.lifetime)*time.Second, maxSessionLifetime)
	cache.Put(c.ticketKey, &ClientSessionState{
		ticket:      bytes.Clone(m.label),
		psk:         resumptionPSK(c.resumptionSecret, m.nonce),
		cipherSuite: c.cipherSuite,
		receivedAt:  c.config.now(),
		lifetime:    lifetime,
		ageAdd:      m.ageAdd,
		serverCerts: c.peerCertificates,
		verified:    c.verifiedChains,
		alpn:        c.negotiatedProtocol,
	})
}

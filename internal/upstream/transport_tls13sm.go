package upstream

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// tls13SMTransport reaches tls13sm:// targets as a TLS 1.3 ShangMi client
// (RFC 8998, package tlcp/tls13): HTTP/1.1 over it with keep-alive
// connections for HTTP routes, one connection per client connection for
// TCP routes. Each target has its own client configuration, and tickets
// are kept per target and per client identity, so that a connection never
// offers another target's ticket nor one made for a rotated-out
// certificate.
type tls13SMTransport struct {
	dialer *net.Dialer
	// handshake bounds connecting and the handshake together.
	handshake time.Duration
	configs   map[string]*tls13.Config // by target address
	settings  transportSettings
	log       *slog.Logger
	// tickets keeps the pool's tickets (nil: resumption off).
	tickets *ticketShelf
	// http carries the HTTP routes with the client identity in service;
	// renewMu orders its replacement when that identity changes.
	http    atomic.Pointer[tls13SMConns]
	renewMu sync.Mutex
	// identity is the store that holds the client certificate (nil when
	// none is configured), under the name source.
	identity atomic.Pointer[certs.Store]
	source   string
	// current is the client identity last converted from the store.
	current atomic.Pointer[tls13Identity]
	// handshakeDone is told of every completed handshake.
	handshakeDone func(tls13.ConnectionState)
	// caFile and caDigest are the CA file read and its contents' digest.
	caFile   string
	caDigest [sha256.Size]byte
}

// tls13SMConns is the HTTP client of one client identity (tag).
type tls13SMConns struct {
	tag  string
	http *http.Transport
}

// tls13Identity is a client identity of the store in the form TLS 1.3
// presents it: the signing pair of a (sign-only) TLCP identity.
type tls13Identity struct {
	from *tlcp.Certificate
	cert *tls13.Certificate // nil when the store holds no usable key
	tag  string
}

func newTLS13SMTransport(p *Pool, uc *config.Upstream, ts transportSettings) (*tls13SMTransport, error) {
	tc := uc.TLS13SM
	if tc == nil {
		tc = &config.UpstreamTLS13SM{}
	}
	tr := &tls13SMTransport{
		dialer:    ts.dialer(),
		handshake: ts.timeouts.UpstreamConnect.D(),
		configs:   map[string]*tls13.Config{},
		settings:  ts,
		log:       p.log,
		source:    Source(p.Name),
		handshakeDone: func(cs tls13.ConnectionState) {
			p.metrics.UpstreamTLCP.WithLabelValues(p.Name, tls13.CipherSuiteName(cs.CipherSuite), strconv.FormatBool(cs.DidResume)).Inc()
		},
	}
	roots, digest, err := loadTLCPRoots(tc.CA)
	if err != nil {
		return nil, &config.FieldError{Field: "tls13sm.ca", Err: err}
	}
	tr.caFile, tr.caDigest = tc.CA, digest
	if tc.HasIdentity() && ts.store != nil {
		tr.identity.Store(ts.store)
	}
	var suites []uint16
	for i, n := range tc.Suites {
		id, ok := config.TLS13SuiteByName(n)
		if !ok {
			return nil, &config.FieldError{Field: fmt.Sprintf("tls13sm.suites[%d]", i), Err: fmt.Errorf("unknown suite %q", n)}
		}
		suites = append(suites, id)
	}
	var groups []tls13.CurveID
	for i, n := range tc.Groups {
		g, ok := config.TLS13GroupByName(n)
		if !ok {
			return nil, &config.FieldError{Field: fmt.Sprintf("tls13sm.groups[%d]", i), Err: fmt.Errorf("unknown group %q", n)}
		}
		groups = append(groups, g)
	}
	if sc := tc.SessionCache; sc != nil && sc.Size != nil && *sc.Size > 0 {
		tr.tickets = newTicketShelf(*sc.Size, sc.Lifetime.D())
	}
	for _, t := range p.Targets {
		cfg := &tls13.Config{
			RootCAs:                roots,
			ServerName:             tc.ServerName,
			InsecureSkipVerify:     tc.InsecureSkipVerify,
			CipherSuites:           suites,
			CurvePreferences:       groups,
			SessionTicketsDisabled: tr.tickets == nil,
		}
		if cfg.ServerName == "" {
			cfg.ServerName = t.url.Hostname()
		}
		tr.configs[t.Addr] = cfg
	}
	tr.http.Store(tr.newConns(tr.identityInService().tag))
	return tr, nil
}

func (tr *tls13SMTransport) newConns(tag string) *tls13SMConns {
	ht := tr.settings.httpTransport()
	ht.DialTLSContext = tr.settings.boundWrites(func(ctx context.Context, _, addr string) (net.Conn, error) {
		return tr.dial(ctx, addr)
	})
	tr.settings.boundConns(ht)
	return &tls13SMConns{tag: tag, http: ht}
}

// identityInService returns the client identity to present now, converted
// once per certificate the store loads (a reload loads them anew: the same
// certificates keep their tag, and their connections).
func (tr *tls13SMTransport) identityInService() *tls13Identity {
	s := tr.identity.Load()
	if s == nil {
		return &tls13Identity{}
	}
	c := s.TLCPCertificate(tr.source)
	if cur := tr.current.Load(); cur != nil && cur.from == c {
		return cur
	}
	id := &tls13Identity{from: c}
	if c != nil && len(c.SignCertificate) > 0 {
		h := sha256.New()
		for _, der := range c.SignCertificate {
			h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(der))))
			h.Write(der)
		}
		id.tag = hex.EncodeToString(h.Sum(nil)[:8])
		if signer, ok := c.SignKey.(crypto.Signer); ok {
			id.cert = &tls13.Certificate{Certificate: c.SignCertificate, PrivateKey: signer, Leaf: c.SignLeaf}
		}
	}
	tr.current.Store(id)
	return id
}

// UseStore takes the client identity from the store of the generation in
// service; a pool kept across a reload gets the new store.
func (tr *tls13SMTransport) UseStore(s *certs.Store) {
	if tr.identity.Load() != nil {
		tr.identity.Store(s)
	}
}

// FilesUnchanged reports whether the CA file still holds what the
// transport read, so that a reload keeps a pool only when its roots (and
// the sessions verified under them) are still current.
func (tr *tls13SMTransport) FilesUnchanged() bool {
	_, digest, err := loadTLCPRoots(tr.caFile)
	return err == nil && digest == tr.caDigest
}

// dial connects to the target at addr and completes the handshake, both
// within the connect timeout, presenting the identity in service; the
// tickets the connection receives are kept under that identity. Its
// errors say which step failed.
func (tr *tls13SMTransport) dial(ctx context.Context, addr string) (*tls13.Conn, error) {
	base := tr.configs[addr]
	if base == nil {
		return nil, fmt.Errorf("%s is not a target of this upstream", addr)
	}
	id := tr.identityInService()
	cfg := base.Clone()
	if id.cert != nil {
		cert := id.cert
		cfg.GetClientCertificate = func(*tls13.CertificateRequestInfo) (*tls13.Certificate, error) { return cert, nil }
	}
	if tr.tickets != nil {
		cfg.ClientSessionCache = tr.tickets.shelf(addr + " " + id.tag)
	}
	ctx, cancel := context.WithTimeout(ctx, tr.handshake)
	defer cancel()
	raw, err := tr.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &stageError{stage: stageConnect, err: err}
	}
	c := tls13.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, &stageError{stage: stageHandshake, proto: protoTLS13SM, err: err}
	}
	if tr.handshakeDone != nil {
		tr.handshakeDone(c.ConnectionState())
	}
	return c, nil
}

// connections returns the HTTP client of the identity in service, made
// anew when the identity changed: the old one takes no new request, and
// its idle connections close (the busy ones when idle_timeout passes
// after their last request).
func (tr *tls13SMTransport) connections() *tls13SMConns {
	tag := tr.identityInService().tag
	cur := tr.http.Load()
	if cur.tag == tag {
		return cur
	}
	tr.renewMu.Lock()
	defer tr.renewMu.Unlock()
	if cur = tr.http.Load(); cur.tag == tag {
		return cur
	}
	next := tr.newConns(tag)
	tr.http.Store(next)
	cur.http.CloseIdleConnections()
	return next
}

func (tr *tls13SMTransport) roundTrip(req *http.Request, t *Target, h *Hooks) (*http.Response, error) {
	req = traced(req, h)
	// http.Transport dials "https" requests with DialTLSContext.
	req.URL.Scheme = "https"
	req.URL.Host = t.Addr
	resp, err := tr.connections().http.RoundTrip(req)
	if err != nil {
		if !errors.As(err, new(*stageError)) {
			err = &stageError{stage: stageRequest, err: err}
		}
		return nil, err
	}
	return resp, nil
}

// dialStream makes a connection of its own for a TCP route.
func (tr *tls13SMTransport) dialStream(ctx context.Context, t *Target) (net.Conn, error) {
	return tr.dial(ctx, t.Addr)
}

// probe connects and completes a handshake (resumed when it can be).
func (tr *tls13SMTransport) probe(ctx context.Context, t *Target) error {
	c, err := tr.dial(ctx, t.Addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func (tr *tls13SMTransport) CloseIdle() { tr.http.Load().http.CloseIdleConnections() }

// ticketShelf is a pool's client ticket cache: tls13's LRU cache, with
// keys that name the target and the client identity, and a lifetime
// (session_cache.lifetime) past which a ticket is not offered even when
// the target's own lifetime is longer.
type ticketShelf struct {
	cache    tls13.ClientSessionCache
	lifetime time.Duration
	capacity int
	// now is the clock (time.Now; a test's own).
	now    func() time.Time
	mu     sync.Mutex
	stored map[string]time.Time
}

func newTicketShelf(size int, lifetime time.Duration) *ticketShelf {
	return &ticketShelf{cache: tls13.NewLRUClientSessionCache(size), lifetime: lifetime, capacity: size, now: time.Now, stored: map[string]time.Time{}}
}

// shelf returns the part of the cache that belongs to prefix (a target
// and a client identity).
func (s *ticketShelf) shelf(prefix string) tls13.ClientSessionCache {
	return shelfPart{s: s, prefix: prefix + " "}
}

type shelfPart struct {
	s      *ticketShelf
	prefix string
}

func (p shelfPart) Get(key string) (*tls13.ClientSessionState, bool) {
	k := p.prefix + key
	p.s.mu.Lock()
	at, ok := p.s.stored[k]
	p.s.mu.Unlock()
	if !ok || p.s.lifetime > 0 && p.s.now().Sub(at) > p.s.lifetime {
		return nil, false
	}
	return p.s.cache.Get(k)
}

func (p shelfPart) Put(key string, cs *tls13.ClientSessionState) {
	k := p.prefix + key
	p.s.cache.Put(k, cs)
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if cs == nil {
		delete(p.s.stored, k)
		return
	}
	p.s.stored[k] = p.s.now()
	if len(p.s.stored) > 2*p.s.capacity {
		// The LRU dropped the oldest tickets: forget their times too.
		for old := range p.s.stored {
			if _, ok := p.s.cache.Get(old); !ok {
				delete(p.s.stored, old)
			}
		}
	}
}

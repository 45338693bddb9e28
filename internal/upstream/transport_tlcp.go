package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/keyref"
	"github.com/gmgate/gmgate/internal/tlcphint"
	"github.com/gmgate/gmgate/tlcp"
)

// tlcpTransport reaches tlcp:// targets as a TLCP client: HTTP/1.1 over
// TLCP with keep-alive connections for HTTP routes (and HTTP/2 with
// http2, transport_h2.go), one TLCP connection per client connection for
// TCP routes. Each target has its own client configuration, so that the
// pool's session cache keeps a session per target and a connection to
// one target never offers another's session.
type tlcpTransport struct {
	dialer *net.Dialer
	// handshake bounds connecting and the handshake together.
	handshake time.Duration
	configs   map[string]*tlcp.Config // by target address
	settings  transportSettings
	// conns are the HTTP routes' connections, made with the client
	// identity in service (see connSet); renewMu orders their
	// replacement, and closed is set (under it) once the pool is closed.
	conns   atomic.Pointer[connSet]
	renewMu sync.Mutex
	closed  bool
	log     *slog.Logger
	// h2 carries the HTTP routes of a pool with http2 (nil without).
	h2 *tlcpHTTP2
	// identity is the store that holds the client certificate (nil when
	// none is configured), under the name source.
	identity atomic.Pointer[certs.Store]
	source   string
	// handshakeDone is told of every completed handshake.
	handshakeDone func(tlcp.ConnectionState)
	// tag names the client identity last seen, for the session cache.
	tag atomic.Pointer[identityTag]
	// caFile and caDigest are the CA file read and its contents' digest.
	caFile   string
	caDigest [sha256.Size]byte
	// profiles are the client profiles the targets take.
	profiles *targetProfiles
}

// hintNames are the configuration's words for what a handshake hint
// names.
var hintNames = tlcphint.Names{
	Profile: func(p string) string { return "profile: " + p },
	Cert:    "tlcp.sign_cert",
	EncCert: "tlcp.enc_cert",
}

// upstreamSource names a tlcp:// upstream's client identity in the
// certificate store (and in the certificate metrics).
func Source(upstream string) string { return "upstreams." + upstream }

func newTLCPTransport(p *Pool, uc *config.Upstream, ts transportSettings) (*tlcpTransport, error) {
	tc := uc.TLCP
	if tc == nil {
		tc = &config.UpstreamTLCP{}
	}
	tr := &tlcpTransport{
		dialer:    ts.dialer(),
		handshake: ts.timeouts.UpstreamConnect.D(),
		configs:   map[string]*tlcp.Config{},
		settings:  ts,
		log:       p.log,
		source:    Source(p.Name),
		handshakeDone: func(cs tlcp.ConnectionState) {
			p.metrics.UpstreamTLCP.WithLabelValues(p.Name, tlcp.CipherSuiteName(cs.CipherSuite), strconv.FormatBool(cs.DidResume)).Inc()
		},
	}
	roots, digest, err := loadTLCPRoots(tc.CA)
	if err != nil {
		return nil, &config.FieldError{Field: "tlcp.ca", Err: err}
	}
	tr.caFile, tr.caDigest = tc.CA, digest
	var cert *tlcp.Certificate
	if tc.HasIdentity() && ts.store != nil {
		cert = ts.store.TLCPCertificate(tr.source)
		tr.identity.Store(ts.store)
	}
	suites, err := upstreamSuites(tc, cert, p.log)
	if err != nil {
		return nil, err
	}
	var sessions tlcp.ClientSessionCache
	if sc := tc.SessionCache; sc != nil && sc.Size != nil && *sc.Size > 0 {
		sessions = tlcp.NewLRUClientSessionCache(*sc.Size, sc.Lifetime.D())
	}
	for _, t := range p.Targets {
		cfg := &tlcp.Config{
			RootCAs:            roots,
			ServerName:         tc.ServerName,
			SendServerName:     tc.SendServerName,
			InsecureSkipVerify: tc.InsecureSkipVerify,
			CipherSuites:       suites,
			SessionsDisabled:   sessions == nil,
		}
		if cfg.ServerName == "" {
			cfg.ServerName = t.url.Hostname()
		}
		if sessions != nil {
			cfg.ClientSessionCache = targetSessions{cache: sessions, target: t.Addr, identity: tr.identityInService}
		}
		if tc.HasIdentity() {
			cfg.GetClientCertificate = tr.clientCertificate
		}
		if tc.Profile != config.UpstreamProfileAuto {
			if err := cfg.SetClientProfile(tc.Profile); err != nil {
				return nil, &config.FieldError{Field: "tlcp.profile", Err: err}
			}
		}
		tr.configs[t.Addr] = cfg
	}
	tr.profiles = newTargetProfiles(p, tc.Profile, p.Targets)
	if uc.HTTP2 {
		tr.h2 = newTLCPHTTP2(tr, p)
	}
	tag, _ := tr.identityInService()
	tr.conns.Store(tr.newConnSet(tag))
	return tr, nil
}

// loadTLCPRoots reads a PEM file of CA certificates (nil for the system
// pool when file is empty) and returns its digest, so that a reload can
// tell a changed file.
func loadTLCPRoots(file string) (*smx509.CertPool, [sha256.Size]byte, error) {
	if file == "" {
		return nil, [sha256.Size]byte{}, nil
	}
	pem, err := certs.ReadCAFile("ca", file)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	pool, err := certs.CAPool(file, pem)
	return pool, sha256.Sum256(pem), err
}

// upstreamSuites returns the suites a tlcp:// upstream offers. The ECDHE
// suites need SM2 key agreement with the client's encryption key, which a
// key on a crypto card does not offer: an explicit list with them is
// refused, the default list loses them (said in the log). Without a key
// (an offline check) its abilities are unknown.
func upstreamSuites(tc *config.UpstreamTLCP, cert *tlcp.Certificate, log interface{ Info(string, ...any) }) ([]uint16, error) {
	var suites []uint16
	ecdhe := false
	for _, n := range tc.Suites {
		id, _ := tlcp.CipherSuiteByName(n)
		suites = append(suites, id)
		ecdhe = ecdhe || isECDHESuite(id)
	}
	if !ecdhe || cert == nil || cert.EncKey == nil || accel.SupportsKeyAgreement(cert.EncKey) {
		return suites, nil
	}
	if !tc.SuitesDefaulted {
		backend := "its"
		if k, ok := cert.EncKey.(accel.Key); ok {
			backend = "the " + k.Backend()
		}
		return nil, &config.FieldError{Field: "tlcp.suites", Err: fmt.Errorf("the ECDHE suites need SM2 key agreement with the client's encryption key %s, which %s backend does not offer; offer the ECC suites only, or use a file: encryption key", keyref.Redact(tc.EncKey), backend)}
	}
	log.Info("ECDHE suites not offered: the client's encryption key cannot do SM2 key agreement")
	return slices.DeleteFunc(suites, isECDHESuite), nil
}

func isECDHESuite(id uint16) bool { return ServesECDHE([]uint16{id}) }

// filesUnchanged reports whether the CA file still holds what the
// transport read, so that a reload keeps a pool only when its roots (and
// the sessions verified under them) are still current.
func (tr *tlcpTransport) FilesUnchanged() bool {
	_, digest, err := loadTLCPRoots(tr.caFile)
	return err == nil && digest == tr.caDigest
}

// clientCertificate answers a target's CertificateRequest with the
// identity in service (certificate files are reloaded when they change).
func (tr *tlcpTransport) clientCertificate(*tlcp.CertificateRequestInfo) (*tlcp.Certificate, error) {
	if s := tr.identity.Load(); s != nil {
		if c := s.TLCPCertificate(tr.source); c != nil {
			return c, nil
		}
	}
	return nil, nil
}

// identityTag names the client identity in service by a digest of the
// certificates it presents ("" without one): sessions are kept under it,
// so that a new client certificate (a rotation, a reload) never resumes a
// session the target made for the old one, and the HTTP routes'
// connections are made anew when it changes (see connSet).
type identityTag struct {
	cert *tlcp.Certificate
	tag  string
}

// identityInService returns the tag of the client certificate in service and the
// certificate itself (DER), "" and nil without one.
func (tr *tlcpTransport) identityInService() (tag string, leaf []byte) {
	c, _ := tr.clientCertificate(nil)
	if c == nil || len(c.SignCertificate) == 0 {
		return "", nil
	}
	leaf = c.SignCertificate[0]
	if t := tr.tag.Load(); t != nil && t.cert == c {
		return t.tag, leaf
	}
	// A reload loads the files anew: the same certificates keep their
	// tag, and their connections.
	h := sha256.New()
	for _, chain := range [][][]byte{c.SignCertificate, c.EncCertificate} {
		for _, der := range chain {
			h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(der))))
			h.Write(der)
		}
		h.Write([]byte{0})
	}
	t := &identityTag{cert: c, tag: hex.EncodeToString(h.Sum(nil)[:8])}
	tr.tag.Store(t)
	return t.tag, leaf
}

// useStore takes the client identity from the store of the generation in
// service; a pool kept across a reload gets the new store.
func (tr *tlcpTransport) UseStore(s *certs.Store) {
	if tr.identity.Load() != nil {
		tr.identity.Store(s)
	}
}

// dial connects to the target at addr and completes the TLCP handshake
// with its configuration, both within the connect timeout. Its errors say
// which step failed.
func (tr *tlcpTransport) dial(ctx context.Context, addr string) (*tlcp.Conn, error) {
	return tr.dialWith(ctx, addr, tr.configs[addr])
}

func (tr *tlcpTransport) dialWith(ctx context.Context, addr string, cfg *tlcp.Config) (*tlcp.Conn, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s is not a target of this upstream", addr)
	}
	// One bound for connecting and the handshake, a second try under
	// the other profile included.
	ctx, cancel := context.WithTimeout(ctx, tr.handshake)
	defer cancel()
	profile := tr.profiles.first(addr)
	c, facts, err := tr.handshakeWith(ctx, addr, cfg, profile)
	if err != nil && ctx.Err() == nil {
		if other := tr.profiles.retry(profile, err, facts); other != "" {
			c2, facts2, err2 := tr.handshakeWith(ctx, addr, cfg, other)
			switch {
			case err2 == nil:
				c, err, profile = c2, nil, other
			case tlcphint.ProfileRefused(err2, facts2):
				// Both answers refused: the certificate itself, most
				// likely. The first failure is reported, with a hint
				// for both.
				facts.Profile = tlcphint.ProfileAuto
			}
		}
	}
	if err != nil {
		var se *stageError
		if errors.As(err, &se) && se.stage == stageHandshake {
			tr.profiles.refused(addr)
			se.hint = tlcphint.Hint(se.err, facts, hintNames)
			if se.hint == "" && !facts.ServerCertificates && cfg.SendServerName && refusedByTarget(se.err) {
				se.hint = "the target refused the ClientHello, which carried SNI; GmSSL 3.1 servers refuse any extension: turn send_server_name off for it"
			}
		}
		return nil, err
	}
	tr.profiles.took(addr, profile)
	if tr.handshakeDone != nil {
		tr.handshakeDone(c.ConnectionState())
	}
	return c, nil
}

// handshakeWith connects to addr and completes a handshake under
// profile, recording what the client saw.
func (tr *tlcpTransport) handshakeWith(ctx context.Context, addr string, cfg *tlcp.Config, profile string) (*tlcp.Conn, tlcphint.Facts, error) {
	raw, err := tr.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, tlcphint.Facts{}, &stageError{stage: stageConnect, err: err}
	}
	rec, facts := tlcphint.Record(cfg, profile)
	if err := rec.SetClientProfile(profile); err != nil {
		raw.Close()
		return nil, *facts, &stageError{stage: stageHandshake, err: err}
	}
	c := tlcp.Client(raw, rec)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		if len(cfg.NextProtos) > 0 && refusedByTarget(err) {
			err = &alpnRefusedError{err}
		}
		return nil, *facts, &stageError{stage: stageHandshake, err: err}
	}
	return c, *facts, nil
}

func (tr *tlcpTransport) roundTrip(req *http.Request, t *Target, h *Hooks) (*http.Response, error) {
	req = traced(req, h)
	// http.Transport dials "https" requests with DialTLSContext.
	req.URL.Scheme = "https"
	req.URL.Host = t.Addr
	set := tr.connections()
	var resp *http.Response
	var err error
	if tr.h2 != nil {
		resp, err = tr.h2.roundTrip(set, req, t)
	} else {
		resp, err = set.http.RoundTrip(req)
	}
	if err != nil {
		set.Release()
		if !errors.As(err, new(*stageError)) {
			err = &stageError{stage: stageRequest, err: err}
		}
		return nil, err
	}
	set.holdFor(resp)
	return resp, nil
}

// dialStream makes a connection of its own for a TCP route: a stream
// that outlives a change of client identity keeps the identity it was
// made with until it ends.
func (tr *tlcpTransport) dialStream(ctx context.Context, t *Target) (net.Conn, error) {
	return tr.dial(ctx, t.Addr)
}

// probe connects and completes a handshake (resumed when it can be), as
// requests do: with http2, offering HTTP/2.
func (tr *tlcpTransport) probe(ctx context.Context, t *Target) error {
	if tr.h2 != nil {
		return tr.h2.probe(ctx, t)
	}
	c, err := tr.dial(ctx, t.Addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func (tr *tlcpTransport) CloseIdle() {
	tr.conns.Load().CloseIdle()
}

// close closes the idle connections of a pool that is no longer in
// service, and the others once their requests are done.
func (tr *tlcpTransport) Close() {
	tr.renewMu.Lock()
	tr.closed = true
	set := tr.conns.Load()
	tr.renewMu.Unlock()
	set.retire()
}

// targetSessions is the part of a pool's client session cache that
// belongs to one target and the client identity in service.
type targetSessions struct {
	cache    tlcp.ClientSessionCache
	target   string
	identity func() (tag string, leaf []byte)
}

func (s targetSessions) key(k, tag string) string { return s.target + " " + tag + " " + k }

func (s targetSessions) Get(key string) (*tlcp.ClientSessionState, bool) {
	tag, _ := s.identity()
	return s.cache.Get(s.key(key, tag))
}

// Put files a session under the identity in service, unless its handshake
// presented another certificate: one rotated out while the handshake was
// under way, whose session would present it again.
func (s targetSessions) Put(key string, cs *tlcp.ClientSessionState) {
	tag, leaf := s.identity()
	if cs != nil {
		if sent := cs.ClientCertificate(); sent != nil && !bytes.Equal(sent, leaf) {
			return
		}
	}
	s.cache.Put(s.key(key, tag), cs)
}

// servesECDHE reports whether suites lists an ECDHE suite.
func ServesECDHE(suites []uint16) bool {
	for _, id := range suites {
		for _, cs := range tlcp.CipherSuites() {
			if cs.ID == id && cs.ECDHE {
				return true
			}
		}
	}
	return false
}

package tlcp

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/internal/testpki"
)

// twoHandshakes connects with ccfg to first and then, with the same client
// session cache, to second, and returns the second handshake: what a
// client holding a session meets after a reload, a rotation or under
// another configuration sharing the session cache.
func twoHandshakes(t *testing.T, ccfg, first, second *Config) (*Conn, *Conn, error, error) {
	t.Helper()
	if ccfg.ClientSessionCache == nil {
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	}
	if _, _, cerr, serr := handshakePair(t, ccfg, first); cerr != nil || serr != nil {
		t.Fatalf("first handshake: client %v, server %v", cerr, serr)
	}
	return handshakePair(t, ccfg, second)
}

// poolOf returns a pool of the CAs' certificates.
func poolOf(cas ...*testpki.CA) *smx509.CertPool {
	pool := smx509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return pool
}

// TestResumptionRechecksClientPolicy: a session resumes only if a full
// handshake under the server's current configuration would have accepted
// the client; otherwise the client falls back to a full handshake, which
// the policy then decides.
func TestResumptionRechecksClientPolicy(t *testing.T) {
	p := getPKI(t)
	// A client certificate from the unrelated CA, which no pool below
	// trusts unless it says so.
	stranger := issueDual(t, p.otherCA, "stranger", nil, nil)
	// The unrelated CA re-keyed under the same name.
	rekeyed := testpki.NewCA(t, p.otherCA.Cert.Subject.CommonName)
	shortLived := issueDual(t, p.ca, "client.test", nil, func(sign, enc *smx509.Certificate) {
		sign.NotAfter = time.Now().Add(time.Hour)
		enc.NotAfter = sign.NotAfter
	})
	rotated := issueDual(t, p.ca, "server.test", []string{"server.test"}, nil)

	// server returns a configuration sharing one session cache, as a
	// listener's configurations do across reloads.
	cache := map[string]SessionCache{}
	server := func(name string, auth ClientAuthType, cas *smx509.CertPool, adjust func(*Config)) *Config {
		if cache[name] == nil {
			cache[name] = NewLRUSessionCache(16, time.Hour)
		}
		cfg := &Config{Certificates: []Certificate{p.server}, ClientAuth: auth, ClientCAs: cas, SessionCache: cache[name], SessionContext: "edge"}
		if adjust != nil {
			adjust(cfg)
		}
		return cfg
	}
	for _, tc := range []struct {
		name          string
		clientCert    *Certificate
		first, second func(name string) *Config
		// wantAlert is the alert of the second, full, handshake; 0 when
		// it succeeds.
		wantAlert  Alert
		wantResume bool
	}{
		{
			name: "require, then require_and_verify", clientCert: &stranger,
			first:     func(n string) *Config { return server(n, RequireAnyClientCert, nil, nil) },
			second:    func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			wantAlert: AlertUnknownCA,
		},
		{
			name: "request, then require_and_verify", clientCert: &stranger,
			first:     func(n string) *Config { return server(n, RequestClientCert, nil, nil) },
			second:    func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			wantAlert: AlertUnknownCA,
		},
		{
			name:      "none, then require_and_verify",
			first:     func(n string) *Config { return server(n, NoClientCert, nil, nil) },
			second:    func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			wantAlert: AlertHandshakeFailure,
		},
		{
			name: "CA removed from ClientCAs", clientCert: &stranger,
			first:     func(n string) *Config { return server(n, RequireAndVerifyClientCert, poolOf(p.ca, p.otherCA), nil) },
			second:    func(n string) *Config { return server(n, RequireAndVerifyClientCert, poolOf(p.ca), nil) },
			wantAlert: AlertUnknownCA,
		},
		{
			name: "CA replaced by another of the same name", clientCert: &stranger,
			first:     func(n string) *Config { return server(n, RequireAndVerifyClientCert, poolOf(p.ca, p.otherCA), nil) },
			second:    func(n string) *Config { return server(n, RequireAndVerifyClientCert, poolOf(p.ca, rekeyed), nil) },
			wantAlert: AlertUnknownCA,
		},
		{
			name: "client certificate expired since", clientCert: &shortLived,
			first: func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			second: func(n string) *Config {
				return server(n, RequireAndVerifyClientCert, p.roots, func(c *Config) {
					c.Time = func() time.Time { return time.Now().Add(2 * time.Hour) }
				})
			},
			wantAlert: AlertCertificateExpired,
		},
		{
			name: "require_and_verify, then none", clientCert: &p.client,
			first:  func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			second: func(n string) *Config { return server(n, NoClientCert, nil, nil) },
		},
		{
			name: "server certificate rotated", clientCert: &p.client,
			first: func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			second: func(n string) *Config {
				return server(n, RequireAndVerifyClientCert, p.roots, func(c *Config) { c.Certificates = []Certificate{rotated} })
			},
		},
		{
			name: "another session context", clientCert: &p.client,
			first: func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
			second: func(n string) *Config {
				return server(n, RequireAndVerifyClientCert, p.roots, func(c *Config) { c.SessionContext = "other" })
			},
		},
		{
			name: "serverAuth-only certificates no longer accepted", clientCert: &p.client,
			first: func(n string) *Config {
				return server(n, RequireAndVerifyClientCert, p.roots, func(c *Config) { c.AcceptServerAuthClientCerts = true })
			},
			second: func(n string) *Config { return server(n, RequireAndVerifyClientCert, p.roots, nil) },
		},
		{
			// A reload that changes nothing: new objects, same contents.
			name: "same configuration rebuilt", clientCert: &p.client,
			first: func(n string) *Config { return server(n, RequireAndVerifyClientCert, poolOf(p.ca, p.otherCA), nil) },
			second: func(n string) *Config {
				cert := p.server
				return server(n, RequireAndVerifyClientCert, poolOf(p.otherCA, p.ca), func(c *Config) { c.Certificates = []Certificate{cert} })
			},
			wantResume: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3} {
				ccfg := clientConfig(t)
				ccfg.CipherSuites = []uint16{suite}
				if tc.clientCert != nil {
					ccfg.Certificates = []Certificate{*tc.clientCert}
				} else if cipherSuiteByID(suite).ecdhe {
					continue // ECDHE needs a client certificate
				}
				name := tc.name + CipherSuiteName(suite)
				client, server, cerr, serr := twoHandshakes(t, ccfg, tc.first(name), tc.second(name))
				if tc.wantAlert != 0 {
					assertAlert(t, serr, cerr, tc.wantAlert)
					continue
				}
				if cerr != nil || serr != nil {
					t.Fatalf("%s: second handshake: client %v, server %v", CipherSuiteName(suite), cerr, serr)
				}
				if got := server.ConnectionState().DidResume; got != tc.wantResume || client.ConnectionState().DidResume != got {
					t.Fatalf("%s: resumed = %v, want %v", CipherSuiteName(suite), got, tc.wantResume)
				}
				st := server.ConnectionState()
				if tc.second(name).ClientAuth == NoClientCert && len(st.PeerCertificates) != 0 {
					t.Fatalf("%s: client certificates exposed under NoClientCert", CipherSuiteName(suite))
				}
				if tc.wantResume && len(st.VerifiedChains) == 0 {
					t.Fatalf("%s: resumed without verified chains", CipherSuiteName(suite))
				}
			}
		})
	}
}

// TestCloneDoesNotShareSessionsWithStricterPolicy: a GetConfigForClient
// that hands out stricter clones of a lax configuration (which share its
// session cache) cannot be bypassed by resuming a session of the lax one.
func TestCloneDoesNotShareSessionsWithStricterPolicy(t *testing.T) {
	p := getPKI(t)
	stranger := issueDual(t, p.otherCA, "stranger", nil, nil)
	lax := &Config{Certificates: []Certificate{p.server}, ClientAuth: RequestClientCert}
	strict := lax.Clone()
	strict.ClientAuth = RequireAndVerifyClientCert
	strict.ClientCAs = p.roots
	if strict.SessionCache != lax.serverSessionCache() {
		t.Fatal("the clone does not share the session cache")
	}
	front := lax.Clone()
	front.GetConfigForClient = func(hi *ClientHelloInfo) (*Config, error) {
		if hi.ServerName == "strict.test" {
			return strict, nil
		}
		return nil, nil
	}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{stranger}
	ccfg.InsecureSkipVerify = true
	ccfg.SendServerName = true
	shared := NewLRUClientSessionCache(8, 0)
	// Made on the lax configuration...
	ccfg.ServerName = "lax.test"
	ccfg.ClientSessionCache = shared
	if _, _, cerr, serr := handshakePair(t, ccfg, front); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	// ...offered to the strict one: a client session cache that holds a
	// session for one name offers it for another (as a cache keyed by
	// address does).
	s, _ := shared.Get("lax.test")
	shared.Put("strict.test", s)
	ccfg.ServerName = "strict.test"
	_, _, cerr, serr := handshakePair(t, ccfg, front)
	assertAlert(t, serr, cerr, AlertUnknownCA)

	// The same with the clones used directly.
	ccfg.ServerName = "server.test"
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	_, _, cerr, serr = twoHandshakes(t, ccfg, lax, strict)
	assertAlert(t, serr, cerr, AlertUnknownCA)
}

// marshalingCache keeps sessions only in their marshaled form, as a cache
// shared between processes does.
type marshalingCache struct{ m map[string][]byte }

func (c *marshalingCache) Get(id []byte) (*SessionState, bool) {
	b, ok := c.m[string(id)]
	if !ok {
		return nil, false
	}
	s, err := ParseSessionState(b)
	return s, err == nil
}

func (c *marshalingCache) Put(id []byte, s *SessionState) {
	b, err := s.Marshal()
	if err == nil {
		c.m[string(id)] = b
	}
}

func (c *marshalingCache) Delete(id []byte) { delete(c.m, string(id)) }

// TestResumptionFromMarshaledSession: a session that went through Marshal
// keeps its binding and its chains, which are checked again when it
// resumes.
func TestResumptionFromMarshaledSession(t *testing.T) {
	p := getPKI(t)
	stranger := issueDual(t, p.otherCA, "stranger", nil, nil)
	cache := &marshalingCache{m: map[string][]byte{}}
	server := func(cas *smx509.CertPool) *Config {
		return &Config{Certificates: []Certificate{p.server}, ClientAuth: RequireAndVerifyClientCert, ClientCAs: cas, SessionCache: cache}
	}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{stranger}
	client, srv, cerr, serr := twoHandshakes(t, ccfg, server(poolOf(p.ca, p.otherCA)), server(poolOf(p.otherCA, p.ca)))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	st := srv.ConnectionState()
	if !st.DidResume || !client.ConnectionState().DidResume || len(st.PeerCertificates) != 2 || len(st.VerifiedChains) == 0 {
		t.Fatalf("resumed %v with %d certificates and %d chains", st.DidResume, len(st.PeerCertificates), len(st.VerifiedChains))
	}
	_, _, cerr, serr = handshakePair(t, ccfg, server(poolOf(p.ca)))
	assertAlert(t, serr, cerr, AlertUnknownCA)
}

// TestClientResumptionRechecksServer: a client offers a session only if
// its current configuration would accept the server's certificates, even
// when it shares its session cache with a configuration that skipped
// verification.
func TestClientResumptionRechecksServer(t *testing.T) {
	p := getPKI(t)
	for _, tc := range []struct {
		name   string
		first  func(*Config)
		second func(*Config)
		// anyKey makes the client cache return its session whatever the
		// key (a faulty or address-keyed cache).
		anyKey    bool
		wantAlert Alert // 0: a full handshake that succeeds
	}{
		{"made with InsecureSkipVerify, verifying now",
			func(c *Config) { c.InsecureSkipVerify = true; c.RootCAs = p.other },
			func(c *Config) {}, false, 0},
		{"made with InsecureSkipVerify, untrusted server now",
			func(c *Config) { c.InsecureSkipVerify = true; c.RootCAs = p.other },
			func(c *Config) { c.RootCAs = p.other }, false, AlertUnknownCA},
		{"RootCAs no longer trust the server",
			func(c *Config) {},
			func(c *Config) { c.RootCAs = p.other }, false, AlertUnknownCA},
		{"server certificate expired since",
			func(c *Config) {},
			func(c *Config) { c.Time = func() time.Time { return time.Now().Add(48 * time.Hour) } }, false, AlertCertificateExpired},
		{"another server name",
			func(c *Config) {},
			func(c *Config) { c.ServerName = "other.test" }, true, AlertBadCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shared ClientSessionCache = NewLRUClientSessionCache(8, 0)
			if tc.anyKey {
				shared = &oneSessionCache{}
			}
			first, second := clientConfig(t), clientConfig(t)
			first.ClientSessionCache, second.ClientSessionCache = shared, shared
			tc.first(first)
			tc.second(second)
			scfg := serverConfig(t)
			if _, _, cerr, serr := handshakePair(t, first, scfg); cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			client, server, cerr, serr := handshakePair(t, second, scfg)
			if tc.wantAlert != 0 {
				assertAlert(t, cerr, serr, tc.wantAlert)
				return
			}
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			if client.ConnectionState().DidResume || server.ConnectionState().DidResume {
				t.Fatal("resumed a session the configuration would not have accepted")
			}
			if len(client.ConnectionState().VerifiedChains) == 0 {
				t.Fatal("no verified chain")
			}
		})
	}
	t.Run("same configuration resumes", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
		scfg := serverConfig(t)
		client, _, cerr, serr := twoHandshakes(t, ccfg, scfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if !client.ConnectionState().DidResume {
			t.Fatal("not resumed")
		}
	})
}

// oneSessionCache holds one client session whatever the key.
type oneSessionCache struct{ s *ClientSessionState }

func (c *oneSessionCache) Get(string) (*ClientSessionState, bool) { return c.s, c.s != nil }
func (c *oneSessionCache) Put(_ string, s *ClientSessionState) {
	if s != nil {
		c.s = s
	}
}

// TestECDHECertificatesAreNotAnIdentity: the ECDHE suites make the server
// ask for the client's certificates whatever its policy; under
// NoClientCert they serve the key exchange and are neither exposed as
// PeerCertificates nor handed to VerifyPeerCertificate.
func TestECDHECertificatesAreNotAnIdentity(t *testing.T) {
	p := getPKI(t)
	stranger := issueDual(t, p.otherCA, "admin", nil, nil)
	for _, tc := range []struct {
		policy               ClientAuthType
		wantCerts, wantChain int
		wantResume           bool
	}{
		{NoClientCert, 0, 0, true},
		// Unverified: exposed as the policy asks, but not cached.
		{RequestClientCert, 2, 0, false},
		{RequireAnyClientCert, 2, 0, false},
		{VerifyClientCertIfGiven, 2, 1, true},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
			ccfg.Certificates = []Certificate{stranger}
			if tc.wantChain > 0 {
				ccfg.Certificates = []Certificate{p.client}
			}
			ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
			scfg := serverConfig(t)
			scfg.ClientAuth = tc.policy
			called := 0
			scfg.VerifyPeerCertificate = func([][]byte, [][]*smx509.Certificate) error { called++; return nil }
			for i, wantResume := range []bool{false, tc.wantResume} {
				_, server, cerr, serr := handshakePair(t, ccfg, scfg)
				if cerr != nil || serr != nil {
					t.Fatal(cerr, serr)
				}
				st := server.ConnectionState()
				if st.DidResume != wantResume {
					t.Fatalf("handshake %d: resumed = %v, want %v", i, st.DidResume, wantResume)
				}
				if len(st.PeerCertificates) != tc.wantCerts || len(st.VerifiedChains) != tc.wantChain {
					t.Fatalf("handshake %d: %d peer certificates and %d verified chains, want %d and %d",
						i, len(st.PeerCertificates), len(st.VerifiedChains), tc.wantCerts, tc.wantChain)
				}
			}
			if wantCalls := min(tc.wantCerts, 1); tc.wantResume && called != wantCalls || !tc.wantResume && called != 2*wantCalls {
				t.Fatalf("VerifyPeerCertificate called %d times", called)
			}
		})
	}
}

// TestMarshaledChainsFindTheirCAs: a marshaled session names its chain's
// CA by digest. A process that knows the CA checks the chain against the
// clock and ClientCAs without verifying signatures again; one that does
// not verifies the certificates again and then knows the CA; a CA swapped
// for another of the same subject (the same binding) refuses the session.
func TestMarshaledChainsFindTheirCAs(t *testing.T) {
	caA := testpki.NewCA(t, "swapped CA")
	caB := testpki.NewCA(t, "swapped CA")
	client := issueDual(t, caA, "client of A", nil, nil)
	p := getPKI(t)
	cache := &marshalingCache{m: map[string][]byte{}}
	server := func(cas *smx509.CertPool) *Config {
		return &Config{Certificates: []Certificate{p.server}, ClientAuth: RequireAndVerifyClientCert, ClientCAs: cas, SessionCache: cache}
	}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{client}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	if _, _, cerr, serr := handshakePair(t, ccfg, server(caA.Roots)); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if len(cache.m) != 1 {
		t.Fatalf("%d sessions cached", len(cache.m))
	}
	var sealed []byte
	for _, b := range cache.m {
		sealed = b
	}
	st, err := ParseSessionState(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.chains) != 1 || len(st.chains[0]) != 2 || st.chains[0][0].peer != 0 || st.chains[0][1].peer >= 0 {
		t.Fatalf("marshaled chains %+v, want the client's certificate and its CA", st.chains)
	}
	caCert := caA.Cert
	if sum := st.chains[0][1].sum; sum != caDigest(sm3.Sum(caCert.Raw)) || knownCAs.lookup(sum) == nil || !bytes.Equal(knownCAs.lookup(sum).Raw, caCert.Raw) {
		t.Fatal("the chain's CA is not named by its digest, or not known after the handshake")
	}
	certs, err := parseCertificates(st.PeerCertificates)
	if err != nil {
		t.Fatal(err)
	}

	resume := func(cas *smx509.CertPool) (bool, error) {
		t.Helper()
		c, s, cerr, serr := handshakePair(t, ccfg, server(cas))
		if cerr != nil || serr != nil {
			return false, errors.Join(cerr, serr)
		}
		st := s.ConnectionState()
		if c.ConnectionState().DidResume != st.DidResume {
			t.Fatal("client and server disagree on resumption")
		}
		if len(st.VerifiedChains) == 0 || !bytes.Equal(st.VerifiedChains[0][len(st.VerifiedChains[0])-1].Raw, caCert.Raw) {
			t.Fatalf("verified chains %v", st.VerifiedChains)
		}
		return st.DidResume, nil
	}
	// Known: the chain resolves, in another pool of the same CA.
	if got := st.chains[0].chain(certs); got == nil {
		t.Fatal("a known CA does not resolve")
	}
	if ok, err := resume(poolOf(caA)); err != nil || !ok {
		t.Fatalf("resumed %v: %v", ok, err)
	}

	// Unknown (as in a process that never verified a certificate from
	// it): verified again, resumed, and known afterwards.
	sum := st.chains[0][1].sum
	knownCAs.mu.Lock()
	delete(knownCAs.bySum, sum)
	for c, s := range knownCAs.byCert {
		if s == sum {
			delete(knownCAs.byCert, c)
		}
	}
	knownCAs.mu.Unlock()
	if st.chains[0].chain(certs) != nil {
		t.Fatal("a forgotten CA resolves")
	}
	if ok, err := resume(poolOf(caA)); err != nil || !ok {
		t.Fatalf("resumed %v: %v", ok, err)
	}
	if knownCAs.lookup(sum) == nil {
		t.Fatal("verifying again did not make the CA known")
	}

	// A CA of the same subject but another key: the same binding, and the
	// session is refused; the full handshake then fails on the client's
	// certificate.
	_, _, cerr, serr := handshakePair(t, ccfg, server(caB.Roots))
	assertAlert(t, serr, cerr, AlertUnknownCA)
}

// TestParseSessionChains: what a marshaled chain may hold.
func TestParseSessionChains(t *testing.T) {
	base := SessionState{Version: VersionTLCP, CipherSuite: ECC_SM4_GCM_SM3, MasterSecret: make([]byte, 48),
		PeerCertificates: [][]byte{{1}, {2}}, verified: true}
	ca := chainLink{peer: -1, sum: caDigest{1, 2, 3}}
	for _, tc := range []struct {
		name   string
		chains []sessionChain
		ok     bool
	}{
		{"none", nil, true},
		{"leaf and CA", []sessionChain{{{peer: 0}, ca}}, true},
		{"leaf, intermediate from the client, CA", []sessionChain{{{peer: 0}, {peer: 1}, ca}}, true},
		{"starts with a CA", []sessionChain{{ca, {peer: 0}}}, false},
		{"starts with another certificate", []sessionChain{{{peer: 1}, ca}}, false},
		{"a certificate past the client's", []sessionChain{{{peer: 0}, {peer: 2}}}, false},
		{"an empty chain", []sessionChain{{}}, false},
		{"too long", []sessionChain{append(sessionChain{{peer: 0}}, slices.Repeat([]chainLink{ca}, maxChainLinks)...)}, false},
		{"too many", slices.Repeat([]sessionChain{{{peer: 0}, ca}}, maxSessionChains+1), false},
	} {
		s := base
		s.chains = tc.chains
		b, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSessionState(b)
		if (err == nil) != tc.ok {
			t.Errorf("%s: parse error %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if err == nil && !reflect.DeepEqual(got.chains, s.chains) {
			t.Errorf("%s: chains %+v, want %+v", tc.name, got.chains, s.chains)
		}
	}
	s := base
	s.PeerCertificates, s.verified = nil, false
	s.chains = []sessionChain{{{peer: 0}, ca}}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSessionState(b); err == nil {
		t.Error("chains without verified certificates parsed")
	}
}

// TestServerForgetsSessionVerifyConnectionRejects: a session that the
// server's VerifyConnection rejects on resumption (its client certificate
// was revoked, say) is dropped from the cache, as one rejected at the end
// of a full handshake is. Otherwise a client that got a new certificate
// would offer the old session, be rejected with it, and never reach the
// full handshake its new certificate needs while the session lives.
func TestServerForgetsSessionVerifyConnectionRejects(t *testing.T) {
	p := getPKI(t)
	old := issueDual(t, p.ca, "client.test", nil, nil)
	renewed := issueDual(t, p.ca, "client.test", nil, nil)
	var revoked atomic.Pointer[[]byte]
	scfg := serverConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	scfg.VerifyConnection = func(cs ConnectionState) error {
		if r := revoked.Load(); r != nil && bytes.Equal(cs.PeerCertificates[0].Raw, *r) {
			return errors.New("client certificate revoked")
		}
		return nil
	}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{old}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}

	revoked.Store(&old.SignCertificate[0])
	ccfg.Certificates = []Certificate{renewed}
	_, _, cerr, serr := handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertBadCertificate)

	client, _, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("with the renewed certificate: client %v, server %v", cerr, serr)
	}
	if client.ConnectionState().DidResume {
		t.Fatal("the rejected session was resumed")
	}
}

// TestClientSessionRecordsClientCertificate: a client session names the
// signing certificate its handshake presented, so that a cache can keep
// it apart from the sessions of another identity; nil when none was
// asked for.
func TestClientSessionRecordsClientCertificate(t *testing.T) {
	p := getPKI(t)
	for _, policy := range []ClientAuthType{NoClientCert, RequireAndVerifyClientCert} {
		t.Run(policy.String(), func(t *testing.T) {
			cache := &oneSessionCache{}
			ccfg := clientConfig(t)
			ccfg.Certificates = []Certificate{p.client}
			ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
			ccfg.ClientSessionCache = cache
			scfg := serverConfig(t)
			scfg.ClientAuth = policy
			if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			if cache.s == nil {
				t.Fatal("no session")
			}
			got := cache.s.ClientCertificate()
			if policy == NoClientCert && got != nil {
				t.Fatal("a certificate recorded that was not presented")
			}
			if policy != NoClientCert && !bytes.Equal(got, p.client.SignCertificate[0]) {
				t.Fatal("the presented signing certificate is not recorded")
			}
		})
	}
}

// revokedError names its alert as a revocation checker's error does.
type revokedError struct{}

func (revokedError) Error() string { return "client certificate revoked" }
func (revokedError) Alert() uint8  { return uint8(AlertCertificateRevoked) }

// TestVerifyConnectionErrorNamesAlert: an error of VerifyConnection that
// names its alert (an Alert() uint8 method, or an *AlertError) is sent
// as that alert, on a full and on a resumed handshake; any other error
// is bad_certificate.
func TestVerifyConnectionErrorNamesAlert(t *testing.T) {
	p := getPKI(t)
	var refuse atomic.Pointer[error]
	scfg := serverConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	scfg.VerifyConnection = func(ConnectionState) error {
		if e := refuse.Load(); e != nil {
			return *e
		}
		return nil
	}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{p.client}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	for _, tc := range []struct {
		err  error
		want Alert
	}{
		{revokedError{}, AlertCertificateRevoked},
		{fmt.Errorf("wrapped: %w", revokedError{}), AlertCertificateRevoked},
		{&AlertError{Alert: AlertCertificateUnknown}, AlertCertificateUnknown},
		{errors.New("plain"), AlertBadCertificate},
	} {
		// A session to resume, made while nothing is refused.
		refuse.Store(nil)
		if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		client, _, cerr, serr := handshakePair(t, ccfg, scfg)
		if cerr != nil || serr != nil || !client.ConnectionState().DidResume {
			t.Fatalf("no resumption to test: %v %v", cerr, serr)
		}
		err := tc.err
		refuse.Store(&err)
		_, _, cerr, serr = handshakePair(t, ccfg, scfg)
		assertAlert(t, serr, cerr, tc.want) // resumed: the session is offered
		_, _, cerr, serr = handshakePair(t, ccfg, scfg)
		assertAlert(t, serr, cerr, tc.want) // full: the session was dropped
	}
}

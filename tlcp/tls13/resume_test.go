package tls13

import (
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/internal/testpki"
)

// connectAndRead runs a handshake and one exchange, so that the client
// reads the server's ticket, and returns both states.
func connectAndRead(t *testing.T, scfg, ccfg *Config) (cli, srv ConnectionState, cerr, serr error) {
	t.Helper()
	c, s, cerr, serr := handshakePair(t, scfg, ccfg)
	if cerr != nil || serr != nil {
		if cerr == nil {
			_, cerr = c.Read(make([]byte, 1))
		}
		return c.ConnectionState(), s.ConnectionState(), cerr, serr
	}
	exchange(t, c, s, []byte("ping"))
	return c.ConnectionState(), s.ConnectionState(), nil, nil
}

func TestResumption(t *testing.T) {
	for _, group := range []CurveID{CurveSM2, CurveSM2MLKEM768} {
		t.Run(group.String(), func(t *testing.T) {
			if group == CurveSM2MLKEM768 {
				requireHybrid(t)
			}
			scfg, ccfg := serverConfig(t), clientConfig(t)
			ccfg.CurvePreferences = []CurveID{group}
			ccfg.NextProtos = []string{"h2"}
			scfg.NextProtos = []string{"h2"}
			ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
			first, _, cerr, serr := connectAndRead(t, scfg, ccfg)
			if cerr != nil || serr != nil || first.DidResume {
				t.Fatalf("first: %v %v resumed=%v", cerr, serr, first.DidResume)
			}
			for i := range 2 {
				cli, srv, cerr, serr := connectAndRead(t, scfg, ccfg)
				if cerr != nil || serr != nil {
					t.Fatalf("resume %d: %v %v", i, cerr, serr)
				}
				if !cli.DidResume || !srv.DidResume || cli.Group != group || srv.Group != group {
					t.Fatalf("resume %d: client %+v server %+v", i, cli, srv)
				}
				if len(cli.PeerCertificates) == 0 || cli.NegotiatedProtocol != "h2" {
					t.Fatalf("resumed client state %+v", cli)
				}
			}
		})
	}
}

func TestResumptionWithRetry(t *testing.T) {
	requireHybrid(t)
	scfg, ccfg := serverConfig(t), clientConfig(t)
	ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
	if _, _, cerr, serr := connectAndRead(t, scfg, ccfg); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	ccfg.CurvePreferences = []CurveID{CurveSM2, CurveSM2MLKEM768}
	scfg.CurvePreferences = []CurveID{CurveSM2MLKEM768}
	cli, srv, cerr, serr := connectAndRead(t, scfg, ccfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if !cli.DidResume || !srv.DidResume || !srv.DidHelloRetryRequest {
		t.Fatalf("client %+v server %+v", cli, srv)
	}
}

// mapCache is a SessionCache that keeps sessions only as marshaled bytes,
// as a cache shared between replicas does.
type mapCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *mapCache) Get(id []byte) (*SessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[string(id)]
	if !ok {
		return nil, false
	}
	st, err := ParseSessionState(b)
	return st, err == nil
}

func (c *mapCache) Put(id []byte, st *SessionState) {
	b, err := st.Marshal()
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[string(id)] = b
}

func (c *mapCache) Delete(id []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, string(id))
}

func TestResumptionAcrossReplicas(t *testing.T) {
	p := getPKI(t)
	t.Run("shared ticket keys", func(t *testing.T) {
		keys := [][32]byte{{1, 2, 3}}
		a, b := serverConfig(t), serverConfig(t)
		a.SessionTicketKeys, b.SessionTicketKeys = keys, keys
		ccfg := clientConfig(t)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, a, ccfg)
		cli, _, cerr, serr := connectAndRead(t, b, ccfg)
		if cerr != nil || serr != nil || !cli.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
	})
	t.Run("shared session cache", func(t *testing.T) {
		cache := &mapCache{m: make(map[string][]byte)}
		a, b := serverConfig(t), serverConfig(t)
		a.SessionCache, b.SessionCache = cache, cache
		a.ClientAuth, b.ClientAuth = RequireAndVerifyClientCert, RequireAndVerifyClientCert
		ccfg := clientConfig(t)
		ccfg.Certificates = []Certificate{p.client}
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, a, ccfg)
		cli, srv, cerr, serr := connectAndRead(t, b, ccfg)
		if cerr != nil || serr != nil || !cli.DidResume || !srv.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
		if len(srv.VerifiedChains) == 0 || srv.PeerCertificates[0].Subject.CommonName != "client.test" {
			t.Fatal("resumed session lost the client's verified identity")
		}
	})
	t.Run("different keys do not resume", func(t *testing.T) {
		a, b := serverConfig(t), serverConfig(t)
		a.SessionTicketKeys, b.SessionTicketKeys = [][32]byte{{1}}, [][32]byte{{2}}
		ccfg := clientConfig(t)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, a, ccfg)
		cli, _, cerr, serr := connectAndRead(t, b, ccfg)
		if cerr != nil || serr != nil || cli.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
	})
}

// TestResumptionReverifies checks that a resumed session goes through the
// client-certificate rules of the moment, as TLCP resumption does: a
// session whose certificate would now fail is not resumed, and the full
// handshake it falls back to fails as a fresh one would.
func TestResumptionReverifies(t *testing.T) {
	p := getPKI(t)
	shortLived := issue(t, p.ca, "short.test", nil, func(sign, enc *smx509.Certificate) {
		sign.NotAfter = time.Now().Add(2 * time.Hour)
	})
	setup := func(t *testing.T, cert Certificate) (*Config, *Config) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		scfg.ClientAuth = RequireAndVerifyClientCert
		ccfg.Certificates = []Certificate{cert}
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		if _, srv, cerr, serr := connectAndRead(t, scfg, ccfg); cerr != nil || serr != nil || len(srv.VerifiedChains) == 0 {
			t.Fatalf("first handshake: %v %v", cerr, serr)
		}
		return scfg, ccfg
	}
	t.Run("still valid resumes", func(t *testing.T) {
		scfg, ccfg := setup(t, shortLived)
		_, srv, cerr, serr := connectAndRead(t, scfg, ccfg)
		if cerr != nil || serr != nil || !srv.DidResume || len(srv.VerifiedChains) == 0 {
			t.Fatalf("%v %v %+v", cerr, serr, srv)
		}
	})
	t.Run("expired since", func(t *testing.T) {
		scfg, ccfg := setup(t, shortLived)
		later := time.Now().Add(3 * time.Hour)
		scfg.Time = func() time.Time { return later }
		_, srv, _, serr := connectAndRead(t, scfg, ccfg)
		if srv.DidResume {
			t.Fatal("a session with an expired client certificate resumed")
		}
		if a, _, ok := alertOf(serr); !ok || a != AlertCertificateExpired {
			t.Fatalf("server: %v", serr)
		}
	})
	t.Run("CA replaced under the same name", func(t *testing.T) {
		scfg, ccfg := setup(t, p.client)
		// Same subject, another key: the session's binding (which names
		// the CAs' subjects) still matches; its chain does not.
		impostor := testpki.NewCA(t, "gmgate tls13 test CA")
		scfg.ClientCAs = impostor.Roots
		_, srv, _, serr := connectAndRead(t, scfg, ccfg)
		if srv.DidResume {
			t.Fatal("a session whose chain no longer verifies resumed")
		}
		if a, _, ok := alertOf(serr); !ok || a != AlertUnknownCA {
			t.Fatalf("server: %v", serr)
		}
	})
	t.Run("policy tightened", func(t *testing.T) {
		// A session made without a client certificate does not serve a
		// policy that requires one.
		scfg, ccfg := serverConfig(t), clientConfig(t)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, scfg, ccfg)
		scfg.ClientAuth = RequireAnyClientCert
		_, srv, _, serr := connectAndRead(t, scfg, ccfg)
		if srv.DidResume {
			t.Fatal("resumed past a stricter policy")
		}
		if a, _, ok := alertOf(serr); !ok || a != AlertCertificateRequired {
			t.Fatalf("server: %v", serr)
		}
	})
	t.Run("session context", func(t *testing.T) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		scfg.SessionContext = "site-a"
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, scfg, ccfg)
		other := scfg.Clone()
		other.SessionContext = "site-b"
		cli, _, cerr, serr := connectAndRead(t, other, ccfg)
		if cerr != nil || serr != nil || cli.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		scfg.SessionLifetime = time.Hour
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, scfg, ccfg)
		later := time.Now().Add(2 * time.Hour)
		scfg.Time = func() time.Time { return later }
		cli, _, cerr, serr := connectAndRead(t, scfg, ccfg)
		if cerr != nil || serr != nil || cli.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
	})
	t.Run("lifetime shortened since", func(t *testing.T) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		connectAndRead(t, scfg, ccfg) // a ticket of DefaultSessionLifetime
		scfg.SessionLifetime = time.Minute
		later := time.Now().Add(10 * time.Minute)
		scfg.Time = func() time.Time { return later }
		cli, _, cerr, serr := connectAndRead(t, scfg, ccfg)
		if cerr != nil || serr != nil || cli.DidResume {
			t.Fatalf("%v %v resumed=%v", cerr, serr, cli.DidResume)
		}
	})
}

func TestSessionStateRoundTrip(t *testing.T) {
	st := &SessionState{
		CipherSuite:      TLS_SM4_CCM_SM3,
		PSK:              make([]byte, 32),
		CreatedAt:        time.Unix(1700000000, 0),
		Lifetime:         time.Hour,
		PeerCertificates: [][]byte{{1, 2, 3}, {4}},
		ServerName:       "a.test",
		ALPN:             "h2",
		Verified:         true,
		Binding:          [32]byte{9},
	}
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSessionState(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := got.Marshal()
	if string(b) != string(b2) || !got.CreatedAt.Equal(st.CreatedAt) || got.Binding != st.Binding || !got.Verified {
		t.Fatalf("round trip: %+v", got)
	}
	for i := range b {
		if _, err := ParseSessionState(b[:i]); err == nil {
			t.Fatalf("truncated state of %d bytes parsed", i)
		}
	}
}

package tlcp

import (
	"bytes"
	"crypto"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
)

func TestResumptionAllSuites(t *testing.T) {
	for _, suite := range allSuites {
		for _, auth := range []bool{false, true} {
			name := CipherSuiteName(suite)
			if auth {
				name += "/clientAuth"
			}
			t.Run(name, func(t *testing.T) {
				ccfg, scfg := suiteConfigs(t, suite, auth)
				cert, signKey, encKey := countingCert(getPKI(t).server)
				scfg.Certificates = []Certificate{cert}
				ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)

				client, server, cerr, serr := handshakePair(t, ccfg, scfg)
				if cerr != nil || serr != nil {
					t.Fatalf("first handshake: client %v, server %v", cerr, serr)
				}
				if client.ConnectionState().DidResume || len(server.ConnectionState().SessionID) != 32 {
					t.Fatal("first handshake resumed, or server issued no session ID")
				}
				exchange(t, client, server, 1000)
				fullOps := signKey.ops() + encKey.ops()
				if fullOps == 0 {
					t.Fatal("the full handshake made no private-key operation on the server")
				}

				client2, server2, cerr, serr := handshakePair(t, ccfg, scfg)
				if cerr != nil || serr != nil {
					t.Fatalf("second handshake: client %v, server %v", cerr, serr)
				}
				cs, ss := client2.ConnectionState(), server2.ConnectionState()
				if !cs.DidResume || !ss.DidResume {
					t.Fatalf("second handshake not resumed (client %v, server %v)", cs.DidResume, ss.DidResume)
				}
				if got := signKey.ops() + encKey.ops(); got != fullOps {
					t.Fatalf("resumed handshake made %d private-key operations on the server", got-fullOps)
				}
				if cs.CipherSuite != suite || !bytes.Equal(cs.SessionID, server.ConnectionState().SessionID) {
					t.Fatal("resumed session differs")
				}
				if len(cs.PeerCertificates) != 2 {
					t.Fatalf("resumed client sees %d server certificates", len(cs.PeerCertificates))
				}
				wantClientCerts, wantChains := 0, 0
				if auth {
					wantClientCerts, wantChains = 2, 1
				}
				if len(ss.PeerCertificates) != wantClientCerts || len(ss.VerifiedChains) != wantChains {
					t.Fatalf("resumed server sees %d client certificates and %d verified chains, want %d and %d",
						len(ss.PeerCertificates), len(ss.VerifiedChains), wantClientCerts, wantChains)
				}
				if auth {
					full, resumed := server.ConnectionState().VerifiedChains[0], ss.VerifiedChains[0]
					if len(full) != len(resumed) || !slices.EqualFunc(full, resumed, func(a, b *smx509.Certificate) bool { return bytes.Equal(a.Raw, b.Raw) }) {
						t.Fatal("resumed verified chain differs from the full handshake's")
					}
				}
				exchange(t, client2, server2, 1000)
			})
		}
	}
}

func TestResumptionFallsBackToFullHandshake(t *testing.T) {
	t.Run("expired", func(t *testing.T) {
		ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
		scfg.SessionCache = NewLRUSessionCache(8, time.Nanosecond)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
		if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		client, _, cerr, serr := handshakePair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if client.ConnectionState().DidResume {
			t.Fatal("resumed an expired session")
		}
	})
	t.Run("unknown", func(t *testing.T) {
		ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
		if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		// A server that never saw the session (another process, a restart).
		_, scfg2 := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
		client, _, cerr, serr := handshakePair(t, ccfg, scfg2)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if client.ConnectionState().DidResume {
			t.Fatal("resumed a session the server does not know")
		}
		// The client replaced its entry: the next handshake resumes.
		client, _, cerr, serr = handshakePair(t, ccfg, scfg2)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if !client.ConnectionState().DidResume {
			t.Fatal("the new session was not resumed")
		}
	})
	t.Run("disabled", func(t *testing.T) {
		ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
		scfg.SessionsDisabled = true
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
		_, server, cerr, serr := handshakePair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if len(server.ConnectionState().SessionID) != 0 {
			t.Fatal("server with sessions disabled issued a session ID")
		}
	})
}

// TestSessionReusedWithDifferentSuite sends a valid session ID while
// offering only a suite other than the session's: the server must run a
// full handshake with a new session.
func TestSessionReusedWithDifferentSuite(t *testing.T) {
	ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
	_, server, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	oldID := server.ConnectionState().SessionID
	c, _ := serveRaw(t, scfg)
	writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_CBC_SM3}, oldID))
	typ, body, err := readRawRecord(c)
	if err != nil || typ != recordTypeHandshake {
		t.Fatalf("reading ServerHello: %v (type %d)", err, typ)
	}
	var sh serverHelloMsg
	if !sh.unmarshal(body) {
		t.Fatalf("first record is not a ServerHello: %x", body)
	}
	if bytes.Equal(sh.sessionID, oldID) || sh.cipherSuite != ECC_SM4_CBC_SM3 {
		t.Fatalf("server resumed the session with suite %s", CipherSuiteName(sh.cipherSuite))
	}
}

func TestClientAuthPolicies(t *testing.T) {
	p := getPKI(t)
	signOnly := p.client
	signOnly.EncCertificate, signOnly.EncKey = nil, nil
	for _, tc := range []struct {
		name       string
		policy     ClientAuthType
		clientCert *Certificate
		signOnly   bool // ClientSignCertOnly
		wantCerts  int
		wantChains bool
		wantAlert  Alert // 0: success
	}{
		{"request/none", RequestClientCert, nil, false, 0, false, 0},
		{"request/given", RequestClientCert, &p.client, false, 2, false, 0},
		{"require-any/none", RequireAnyClientCert, nil, false, 0, false, AlertHandshakeFailure},
		{"verify-if-given/none", VerifyClientCertIfGiven, nil, false, 0, false, 0},
		{"verify-if-given/given", VerifyClientCertIfGiven, &p.client, false, 2, true, 0},
		{"require-and-verify/sign-only", RequireAndVerifyClientCert, &signOnly, false, 1, true, 0},
		{"require-and-verify/ClientSignCertOnly", RequireAndVerifyClientCert, &p.client, true, 1, true, 0},
		{"require-and-verify/both", RequireAndVerifyClientCert, &p.client, false, 2, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
			ccfg.ClientSignCertOnly = tc.signOnly
			if tc.clientCert != nil {
				ccfg.Certificates = []Certificate{*tc.clientCert}
			}
			scfg := serverConfig(t)
			scfg.ClientAuth = tc.policy
			_, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if tc.wantAlert != 0 {
				assertAlert(t, serr, cerr, tc.wantAlert)
				return
			}
			if cerr != nil || serr != nil {
				t.Fatalf("client %v, server %v", cerr, serr)
			}
			st := server.ConnectionState()
			if len(st.PeerCertificates) != tc.wantCerts {
				t.Fatalf("server got %d client certificates, want %d", len(st.PeerCertificates), tc.wantCerts)
			}
			if (len(st.VerifiedChains) > 0) != tc.wantChains {
				t.Fatalf("verified chains: %d", len(st.VerifiedChains))
			}
		})
	}
}

func TestClientCertificateFromUnknownCA(t *testing.T) {
	p := getPKI(t)
	stranger := issueDual(t, p.otherCA, "stranger", nil, nil)
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{stranger}
	scfg := serverConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	_, _, cerr, serr := handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertUnknownCA)
}

// transcriptTamperer signs a wrong CertificateVerify input.
type transcriptTamperer struct{ k *sm2.PrivateKey }

func (s transcriptTamperer) Public() crypto.PublicKey { return s.k.Public() }
func (s transcriptTamperer) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.k.Sign(r, append(bytes.Clone(msg), 0), opts)
}

func TestCertificateVerifyOverWrongTranscript(t *testing.T) {
	cert := getPKI(t).client
	cert.SignKey = transcriptTamperer{cert.SignKey.(*sm2.PrivateKey)}
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{cert}
	scfg := serverConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	_, _, cerr, serr := handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertDecryptError)
}

func TestCertificateVerifyRawTranscriptAccepted(t *testing.T) {
	// GmSSL clients sign the raw handshake messages instead of their SM3
	// hash; the server's check must accept both forms.
	p := getPKI(t)
	key := p.client.SignKey.(*sm2.PrivateKey)
	transcript := []byte("client hello || server hello || ... || client key exchange")
	sum := sm3.Sum(transcript)
	digest := sum[:]
	hashSig, err := signMessage(key, nil, digest)
	if err != nil {
		t.Fatal(err)
	}
	rawSig, err := signMessage(key, nil, transcript)
	if err != nil {
		t.Fatal(err)
	}
	for name, sig := range map[string][]byte{"hash form": hashSig, "raw form": rawSig} {
		if !verifyCertificateVerify(&key.PublicKey, digest, transcript, sig) {
			t.Errorf("%s rejected", name)
		}
	}
	bad := bytes.Clone(rawSig)
	bad[len(bad)-1] ^= 1
	if verifyCertificateVerify(&key.PublicKey, digest, transcript, bad) {
		t.Error("corrupted signature accepted")
	}
}

func TestECDHEWithoutClientEncryptionCertificate(t *testing.T) {
	p := getPKI(t)
	t.Run("client", func(t *testing.T) {
		signOnly := p.client
		signOnly.EncCertificate, signOnly.EncKey = nil, nil
		ccfg := clientConfig(t)
		ccfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
		ccfg.Certificates = []Certificate{signOnly}
		c, _ := localPipe(t)
		defer c.Close()
		err := Client(c, ccfg).Handshake()
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("encryption certificate")) {
			t.Fatalf("got %v, want an error about the missing encryption certificate", err)
		}
	})
	t.Run("server", func(t *testing.T) {
		// A scripted client that offers ECDHE and then sends only its
		// signing certificate.
		c, errc := serveRaw(t, serverConfig(t))
		writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, rawClientHello(t, VersionTLCP, []uint16{ECDHE_SM4_GCM_SM3}, nil))
		readServerFlight(t, c)
		certMsg, _ := (&certificateMsg{certificates: p.client.SignCertificate}).marshal()
		writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, certMsg)
		if got := readRawAlert(t, c); got != AlertHandshakeFailure {
			t.Fatalf("server sent %q, want handshake failure", got)
		}
		err := <-errc
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("encryption certificate")) {
			t.Fatalf("server error %v does not explain the missing encryption certificate", err)
		}
	})
}

func TestECDHEClientKeyExchangeEncodings(t *testing.T) {
	for _, vector := range []bool{false, true} {
		ccfg, scfg := suiteConfigs(t, ECDHE_SM4_CBC_SM3, false)
		ccfg.ClientECDHEParamsAsVector = vector
		client, server, cerr, serr := handshakePair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatalf("vector=%v: client %v, server %v", vector, cerr, serr)
		}
		exchange(t, client, server, 10)
	}
}

func TestSessionStateMarshal(t *testing.T) {
	s := &SessionState{Version: VersionTLCP, CipherSuite: ECC_SM4_GCM_SM3, MasterSecret: bytes.Repeat([]byte{7}, 48),
		PeerCertificates: [][]byte{{1, 2, 3}, {4}}, CreatedAt: time.Unix(1700000000, 0), ServerName: "a.test", verified: true}
	s.binding[0], s.binding[31] = 0xaa, 0x55
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSessionState(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.CipherSuite != s.CipherSuite || !bytes.Equal(got.MasterSecret, s.MasterSecret) || len(got.PeerCertificates) != 2 ||
		!got.CreatedAt.Equal(s.CreatedAt) || got.ServerName != s.ServerName || got.binding != s.binding || !got.verified {
		t.Fatalf("round trip: %+v", got)
	}
	for i := range b {
		if _, err := ParseSessionState(b[:i]); err == nil {
			t.Fatalf("truncated state of %d bytes parsed", i)
		}
	}
	// What a session may not hold does not parse either.
	for name, bad := range map[string]*SessionState{
		"unverified certificates": {Version: VersionTLCP, MasterSecret: s.MasterSecret, PeerCertificates: s.PeerCertificates},
		"too many certificate bytes": {Version: VersionTLCP, MasterSecret: s.MasterSecret, verified: true,
			PeerCertificates: [][]byte{make([]byte, maxSessionCertBytes), {1}}},
		"server name of 256 bytes": {Version: VersionTLCP, MasterSecret: s.MasterSecret, ServerName: strings.Repeat("a", 256)},
	} {
		b, err := bad.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSessionState(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestClientCertificateExtendedKeyUsage: a client certificate must allow
// clientAuth (or name no extended key usage, or any); serverAuth alone
// passes only with AcceptServerAuthClientCerts.
func TestClientCertificateExtendedKeyUsage(t *testing.T) {
	p := getPKI(t)
	withEKU := func(ekus ...smx509.ExtKeyUsage) Certificate {
		return issueDual(t, p.ca, "client.test", nil, func(sign, enc *smx509.Certificate) {
			sign.ExtKeyUsage, enc.ExtKeyUsage = ekus, ekus
		})
	}
	for _, tc := range []struct {
		name    string
		cert    Certificate
		lenient bool
		ok      bool
	}{
		{"clientAuth", withEKU(smx509.ExtKeyUsageClientAuth), false, true},
		{"no extended key usage", withEKU(), false, true},
		{"anyExtendedKeyUsage", withEKU(smx509.ExtKeyUsageAny), false, true},
		{"serverAuth only", withEKU(smx509.ExtKeyUsageServerAuth), false, false},
		{"serverAuth only, lenient", withEKU(smx509.ExtKeyUsageServerAuth), true, true},
		{"codeSigning only, lenient", withEKU(smx509.ExtKeyUsageCodeSigning), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, policy := range []ClientAuthType{VerifyClientCertIfGiven, RequireAndVerifyClientCert} {
				ccfg := clientConfig(t)
				ccfg.Certificates = []Certificate{tc.cert}
				scfg := serverConfig(t)
				scfg.ClientAuth = policy
				scfg.AcceptServerAuthClientCerts = tc.lenient
				_, _, cerr, serr := handshakePair(t, ccfg, scfg)
				if tc.ok {
					if cerr != nil || serr != nil {
						t.Fatalf("%v: client %v, server %v", policy, cerr, serr)
					}
					continue
				}
				assertAlert(t, serr, cerr, AlertUnsupportedCertificate)
			}
		})
	}
}

// holdSecondWrite passes the server's first flight through, then holds the
// write of its last one (ChangeCipherSpec and Finished) after the bytes are
// out, until release is closed: a server still in that write when the
// client, done, reconnects.
type holdSecondWrite struct {
	net.Conn
	writes  int
	release chan struct{}
}

func (h *holdSecondWrite) Write(b []byte) (int, error) {
	n, err := h.Conn.Write(b)
	if h.writes++; h.writes == 2 {
		<-h.release
	}
	return n, err
}

// A client that reconnects the moment its handshake is done finds its
// session: the server caches it before its Finished leaves.
func TestSessionCachedBeforeServerFinished(t *testing.T) {
	for _, suite := range allSuites {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)

			c, s := localPipe(t)
			held := &holdSecondWrite{Conn: s, release: make(chan struct{})}
			server := Server(held, scfg)
			serr := make(chan error, 1)
			go func() { serr <- server.Handshake() }()
			client := Client(c, ccfg)
			if err := client.Handshake(); err != nil {
				close(held.release)
				t.Fatal(err)
			}

			client2, _, cerr, serr2 := handshakePair(t, ccfg, scfg)
			close(held.release)
			if err := <-serr; err != nil {
				t.Fatalf("first server handshake: %v", err)
			}
			client.Close()
			server.Close()
			if cerr != nil || serr2 != nil {
				t.Fatalf("second handshake: client %v, server %v", cerr, serr2)
			}
			if !client2.ConnectionState().DidResume {
				t.Fatal("the session was not cached by the time the client reconnected")
			}
		})
	}
}

package tlcp

import (
	"bytes"
	"crypto/x509/pkix"
	"encoding/asn1"
	"runtime"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/internal/testpki"
)

// padding is a non-critical private extension of n bytes, to make
// certificates of any size.
func padding(n int) pkix.Extension {
	return pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: bytes.Repeat([]byte{0x55}, n)}
}

// selfSignedDual makes a self-signed certificate pair whose certificates
// are about signSize and encSize bytes: what any client can send.
func selfSignedDual(t testing.TB, signSize, encSize int) Certificate {
	t.Helper()
	d := testpki.SelfSigned(t, "admin", func(sign, enc *smx509.Certificate) {
		sign.ExtraExtensions = []pkix.Extension{padding(signSize)}
		enc.ExtraExtensions = []pkix.Extension{padding(encSize)}
	})
	return Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
}

// certBytes is the size of a certificate pair.
func certBytes(c Certificate) int { return len(c.SignCertificate[0]) + len(c.EncCertificate[0]) }

func TestParsedCertificateKeepsOnlyItsBytes(t *testing.T) {
	p := getPKI(t)
	big := selfSignedDual(t, 20000, 100)
	for name, der := range map[string][]byte{"usual": p.client.SignCertificate[0], "large": big.SignCertificate[0]} {
		msg := make([]byte, 65536)
		in := msg[1000 : 1000+len(der)]
		copy(in, der)
		c, err := parseCertificate(in)
		if err != nil {
			t.Fatal(err)
		}
		if cap(c.Raw) != len(der) {
			t.Errorf("%s certificate: Raw refers to %d bytes, its own are %d", name, cap(c.Raw), len(der))
		}
		clear(msg)
		if !bytes.Equal(c.Raw, der) {
			t.Errorf("%s certificate changed with the message it came in", name)
		}
	}
}

func TestCertCacheBounds(t *testing.T) {
	large := selfSignedDual(t, maxCachedCert+100, 100)
	if _, err := parseCertificate(large.SignCertificate[0]); err != nil {
		t.Fatal(err)
	}
	sum := func() int {
		certCache.Lock()
		defer certCache.Unlock()
		n := 0
		for _, c := range certCache.m {
			n += len(c.Raw)
			if len(c.Raw) > maxCachedCert {
				t.Errorf("a certificate of %d bytes is cached", len(c.Raw))
			}
		}
		if n != certCache.bytes {
			t.Errorf("cache counts %d bytes, holds %d", certCache.bytes, n)
		}
		return n
	}
	sum()
	// Certificates just under the size limit fill the byte budget before
	// the entry budget.
	near := selfSignedDual(t, maxCachedCert-600, 100)
	for i := 0; i < 2*certCacheBytes/maxCachedCert; i++ {
		der := bytes.Clone(near.SignCertificate[0])
		der[len(der)-1] ^= byte(i) // a different signature: a different certificate
		der[len(der)-2] ^= byte(i >> 8)
		parseCertificate(der)
		if n := sum(); n > certCacheBytes {
			t.Fatalf("cache holds %d bytes", n)
		}
	}
}

func TestSessionCacheCopiesCertificates(t *testing.T) {
	c := NewLRUSessionCache(4, 0)
	msg := bytes.Repeat([]byte{1}, 60000)
	s := testSession(1)
	s.PeerCertificates = [][]byte{msg[100:600], msg[700:900]}
	s.verified = true
	c.Put([]byte("id"), s)
	clear(msg)
	got, ok := c.Get([]byte("id"))
	if !ok || len(got.PeerCertificates) != 2 || !bytes.Equal(got.PeerCertificates[1], bytes.Repeat([]byte{1}, 200)) {
		t.Fatal("the cache kept the caller's buffer, not a copy")
	}
	if cap(got.PeerCertificates[0]) != 500 {
		t.Fatalf("cached certificate has capacity %d", cap(got.PeerCertificates[0]))
	}
	// Past the bound nothing is kept.
	s.PeerCertificates = [][]byte{make([]byte, maxSessionCertBytes), {1}}
	c.Put([]byte("big"), s)
	if _, ok := c.Get([]byte("big")); ok {
		t.Fatal("a session over the certificate bound was cached")
	}
}

// TestWhichSessionsAreCached: sessions with unverified client certificates
// and sessions whose verified certificates exceed the bound are not
// cached; others are.
func TestWhichSessionsAreCached(t *testing.T) {
	p := getPKI(t)
	stranger := issueDual(t, p.otherCA, "stranger", nil, nil)
	bulky := issueDual(t, p.ca, "client.test", nil, func(sign, enc *smx509.Certificate) {
		sign.ExtraExtensions = []pkix.Extension{padding(maxSessionCertBytes / 2)}
		enc.ExtraExtensions = []pkix.Extension{padding(maxSessionCertBytes / 2)}
	})
	for _, tc := range []struct {
		name   string
		policy ClientAuthType
		cert   *Certificate
		cached bool
	}{
		{"none", NoClientCert, nil, true},
		{"request, no certificate", RequestClientCert, nil, true},
		{"request, unverified certificate", RequestClientCert, &stranger, false},
		{"require, unverified certificate", RequireAnyClientCert, &stranger, false},
		{"require_and_verify", RequireAndVerifyClientCert, &p.client, true},
		{"require_and_verify, certificates over the bound", RequireAndVerifyClientCert, &bulky, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(t)
			if tc.cert != nil {
				ccfg.Certificates = []Certificate{*tc.cert}
			}
			scfg := serverConfig(t)
			scfg.ClientAuth = tc.policy
			cache := NewLRUSessionCache(8, time.Hour).(*lruSessionCache)
			scfg.SessionCache = cache
			if _, _, cerr, serr := handshakePair(t, ccfg, scfg); cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			if got := cache.len() == 1; got != tc.cached {
				t.Fatalf("cached = %v, want %v", got, tc.cached)
			}
		})
	}
}

// handshakeAndClose runs one handshake and closes both ends.
func handshakeAndClose(t testing.TB, ccfg, scfg *Config) {
	c, s := localPipe(t)
	client, server := Client(c, ccfg), Server(s, scfg)
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	cerr := client.Handshake()
	serr := <-errc
	client.Close()
	server.Close()
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
}

// TestSessionCacheRetainedHeap measures the heap a server's session cache
// retains per session, slots included, after handshakes with clients that
// send 60 KB certificates: at most 8 KiB per session, whatever the
// client sends.
func TestSessionCacheRetainedHeap(t *testing.T) {
	p := getPKI(t)
	const sessions = 200
	// A verified pair as large as a session keeps.
	fitting := issueDual(t, p.ca, "client.test", nil, func(sign, enc *smx509.Certificate) {
		sign.ExtraExtensions = []pkix.Extension{padding(maxSessionCertBytes/2 - 700)}
		enc.ExtraExtensions = []pkix.Extension{padding(maxSessionCertBytes/2 - 700)}
	})
	for _, tc := range []struct {
		name   string
		suite  uint16
		policy ClientAuthType
		cert   Certificate
	}{
		{"none/ECDHE/self-signed 60 KB", ECDHE_SM4_GCM_SM3, NoClientCert, selfSignedDual(t, 32000, 30000)},
		{"request/ECC/self-signed 60 KB", ECC_SM4_GCM_SM3, RequestClientCert, selfSignedDual(t, 60000, 100)},
		{"require_and_verify/ECC/verified at the bound", ECC_SM4_GCM_SM3, RequireAndVerifyClientCert, fitting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{tc.suite}
			ccfg.Certificates = []Certificate{tc.cert}
			ccfg.SendServerName = true
			scfg := serverConfig(t)
			scfg.ClientAuth = tc.policy
			// The certificate cache is bounded on its own (see
			// TestCertCacheBounds): start it afresh so that what other
			// tests left in it does not blur the measurement.
			certCache.Lock()
			clear(certCache.m)
			certCache.bytes = 0
			certCache.Unlock()
			handshakeAndClose(t, ccfg, scfg) // warm up pools and caches

			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			cache := NewLRUSessionCache(sessions, time.Hour).(*lruSessionCache)
			scfg.SessionCache = cache
			for i := 0; i < sessions; i++ {
				handshakeAndClose(t, ccfg, scfg)
			}
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			if cache.len() != sessions && tc.policy != RequestClientCert {
				t.Fatalf("%d sessions cached, want %d", cache.len(), sessions)
			}
			perSession := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / sessions
			t.Logf("client certificates of %d bytes: %d sessions cached, %d bytes retained per session", certBytes(tc.cert), cache.len(), perSession)
			if perSession > 8<<10 {
				t.Errorf("%d bytes retained per session, want at most 8 KiB", perSession)
			}
			runtime.KeepAlive(cache)
			runtime.KeepAlive(scfg)
		})
	}
}

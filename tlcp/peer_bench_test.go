package tlcp

// BenchmarkPeerServerHandshake compares the cost of one full handshake on
// our server with that on github.com/tjfoc/gmsm/gmtls, driven by the same
// client, over real loopback TCP.
//
// How to read it:
//
//	go test -run '^$' -bench PeerServerHandshake -cpu 1 -count 6 ./tlcp | tee x.txt
//	benchstat -col /server x.txt
//
// Client and server run in one process, so with -cpu 1 ns/op is the time
// of both sides of one handshake (plus the loopback TCP connection),
// and cpu-ns/op the process CPU time, the steadier figure on a busy
// machine. With the client fixed, the difference between server=gmgate
// and server=tjfoc is the difference in server cost; comparing the two
// clients against one server gives the client cost the same way. The
// garbage collector is shared, though, so a side that allocates much
// also slows its peer a little: the differences are close to, not
// exactly, additive. client=crypto-tls/server=crypto-tls is a reference
// point: TLS 1.2, ECDHE on P-256, ECDSA P-256, AES-128-GCM.
//
// All TLCP runs use ECC_SM4_CBC_SM3 (0xE013), the one suite both
// implementations have (gmtls lists ECDHE 0xE011 too, but its key
// agreement for it is an unimplemented stub), with the same SM2 signing
// and encryption certificates on both servers. Every iteration is a full
// handshake on a new connection: session caches and tickets are off on
// both sides. All clients skip certificate verification
// (InsecureSkipVerify), so that the figures are handshake work, not chain
// building; they still check the server's key exchange signature.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	tjtls "github.com/tjfoc/gmsm/gmtls"
)

// peerConn is the part of a TLS or TLCP connection the benchmark uses.
type peerConn interface {
	Handshake() error
	Close() error
}

// peerImpl makes client or server connections of one implementation.
type peerImpl struct {
	name    string
	client  func(net.Conn) peerConn
	server  func(net.Conn) peerConn
	version uint16 // the protocol version it must negotiate
	suite   uint16 // the cipher suite it must negotiate
}

func BenchmarkPeerServerHandshake(b *testing.B) {
	gmgate, tjfoc := gmgatePeer(b), tjfocPeer(b)
	for _, client := range []peerImpl{tjfoc, gmgate} {
		for _, server := range []peerImpl{gmgate, tjfoc} {
			b.Run("client="+client.name+"/server="+server.name, func(b *testing.B) {
				benchPeerHandshake(b, client, server)
			})
		}
	}
	b.Run("client=crypto-tls/server=crypto-tls", func(b *testing.B) {
		std := cryptoTLSPeer(b)
		benchPeerHandshake(b, std, std)
	})
}

func gmgatePeer(b *testing.B) peerImpl {
	p := getPKI(b)
	scfg := &Config{
		Certificates:     []Certificate{p.server},
		CipherSuites:     []uint16{ECC_SM4_CBC_SM3},
		SessionsDisabled: true,
	}
	ccfg := &Config{
		InsecureSkipVerify: true,
		CipherSuites:       []uint16{ECC_SM4_CBC_SM3},
		SessionsDisabled:   true,
	}
	return peerImpl{
		name:    "gmgate",
		client:  func(c net.Conn) peerConn { return Client(c, ccfg) },
		server:  func(c net.Conn) peerConn { return Server(c, scfg) },
		version: VersionTLCP,
		suite:   ECC_SM4_CBC_SM3,
	}
}

func tjfocPeer(b *testing.B) peerImpl {
	scfg := tjfocServerConfig(b)
	ccfg := &tjtls.Config{
		GMSupport:              tjtls.NewGMSupport(),
		InsecureSkipVerify:     true,
		CipherSuites:           []uint16{tjtls.GMTLS_SM2_WITH_SM4_SM3},
		SessionTicketsDisabled: true,
	}
	return peerImpl{
		name:    "tjfoc",
		client:  func(c net.Conn) peerConn { return tjtls.Client(c, ccfg) },
		server:  func(c net.Conn) peerConn { return tjtls.Server(c, scfg) },
		version: tjtls.VersionGMSSL,
		suite:   tjtls.GMTLS_SM2_WITH_SM4_SM3,
	}
}

// cryptoTLSPeer is crypto/tls limited to TLS 1.2, ECDHE on P-256 and an
// ECDSA P-256 certificate made here.
func cryptoTLSPeer(b *testing.B) peerImpl {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "server.test"},
		DNSNames:              []string{"server.test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	const suite = tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	base := tls.Config{
		MinVersion:       tls.VersionTLS12,
		MaxVersion:       tls.VersionTLS12,
		CipherSuites:     []uint16{suite},
		CurvePreferences: []tls.CurveID{tls.CurveP256},
	}
	scfg := base.Clone()
	scfg.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}
	scfg.SessionTicketsDisabled = true
	ccfg := base.Clone()
	ccfg.InsecureSkipVerify = true
	return peerImpl{
		name:    "crypto-tls",
		client:  func(c net.Conn) peerConn { return tls.Client(c, ccfg) },
		server:  func(c net.Conn) peerConn { return tls.Server(c, scfg) },
		version: tls.VersionTLS12,
		suite:   suite,
	}
}

// peerState is what a finished handshake negotiated.
type peerState struct {
	version, suite uint16
	resumed        bool
}

func stateOf(c peerConn) peerState {
	switch c := c.(type) {
	case *Conn:
		s := c.ConnectionState()
		return peerState{s.Version, s.CipherSuite, s.DidResume}
	case *tjtls.Conn:
		s := c.ConnectionState()
		return peerState{s.Version, s.CipherSuite, s.DidResume}
	case *tls.Conn:
		s := c.ConnectionState()
		return peerState{s.Version, s.CipherSuite, s.DidResume}
	}
	panic(fmt.Sprintf("unknown connection type %T", c))
}

func benchPeerHandshake(b *testing.B, client, server peerImpl) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	tl := l.(*net.TCPListener)
	addr := tl.Addr().(*net.TCPAddr)
	done := make(chan error, 1)
	var sstate peerState

	// handshake runs one connection; with check, it also makes sure that
	// both ends negotiated a full handshake with the expected suite.
	handshake := func(check bool) {
		craw, err := net.DialTCP("tcp", nil, addr)
		if err != nil {
			b.Fatal(err)
		}
		// The connection is already established, so Accept does not wait.
		sraw, err := tl.AcceptTCP()
		if err != nil {
			craw.Close()
			b.Fatal(err)
		}
		// A handshake that gets stuck fails instead of hanging.
		deadline := time.Now().Add(10 * time.Second)
		craw.SetDeadline(deadline)
		sraw.SetDeadline(deadline)
		cc, sc := client.client(craw), server.server(sraw)
		go func() {
			err := sc.Handshake()
			if check && err == nil {
				sstate = stateOf(sc)
			}
			// Closing sends close_notify on a best-effort basis: the
			// client may have torn the connection down already, so
			// errors from Close are not failures.
			sc.Close()
			done <- err
		}()
		cerr := cc.Handshake()
		var cstate peerState
		if check && cerr == nil {
			cstate = stateOf(cc)
		}
		cc.Close()
		// Always wait for the server, so that no goroutine outlives the
		// iteration, even a failed one.
		serr := <-done
		if cerr != nil {
			b.Fatalf("%s client: %v (server: %v)", client.name, cerr, serr)
		}
		if serr != nil {
			b.Fatalf("%s server: %v", server.name, serr)
		}
		if check {
			want := peerState{server.version, server.suite, false}
			if cstate != want || sstate != want {
				b.Fatalf("client negotiated %+v, server %+v, want %+v", cstate, sstate, want)
			}
		}
	}

	// Two checked handshakes first: the second would be the one to resume
	// if any session cache or ticket were in use.
	handshake(true)
	handshake(true)

	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		handshake(false)
	}
	cpu.report(b)
}

package tls13

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"go.uber.org/goleak"

	"github.com/gmgate/gmgate/internal/testpki"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPKI is a CA with a server and a client identity, made once per test
// binary.
type testPKI struct {
	ca      *testpki.CA
	roots   *smx509.CertPool
	server  Certificate
	client  Certificate
	otherCA *testpki.CA
}

var pkiCache atomic.Pointer[testPKI]

func getPKI(t testing.TB) *testPKI {
	if p := pkiCache.Load(); p != nil {
		return p
	}
	p := &testPKI{}
	p.ca = testpki.NewCA(t, "gmgate tls13 test CA")
	p.roots = p.ca.Roots
	p.server = issue(t, p.ca, "server.test", []string{"server.test", "localhost"}, nil)
	p.client = issue(t, p.ca, "client.test", nil, nil)
	p.otherCA = testpki.NewCA(t, "unrelated CA")
	pkiCache.Store(p)
	return p
}

// issue issues the signing certificate of a TLCP pair: the identity a TLS
// 1.3 ShangMi peer uses.
func issue(t testing.TB, ca *testpki.CA, cn string, dns []string, adjust testpki.Adjust) Certificate {
	t.Helper()
	d := ca.IssueDual(t, cn, dns, adjust)
	leaf, err := smx509.ParseCertificate(d.SignCert)
	if err != nil {
		t.Fatal(err)
	}
	return Certificate{Certificate: [][]byte{d.SignCert}, PrivateKey: d.SignKey, Leaf: leaf}
}

func serverConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{Certificates: []Certificate{p.server}, ClientCAs: p.roots}
}

func clientConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{RootCAs: p.roots, ServerName: "server.test"}
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		ch <- result{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatal(r.err)
	}
	return client, r.c
}

// handshakePair runs both handshakes and returns the connections with
// each side's error.
func handshakePair(t testing.TB, serverCfg, clientCfg *Config) (cli, srv *Conn, cliErr, srvErr error) {
	t.Helper()
	c, s := tcpPair(t)
	cli, srv = Client(c, clientCfg), Server(s, serverCfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srvErr = srv.HandshakeContext(ctx)
		if srvErr != nil {
			s.Close()
		}
	}()
	cliErr = cli.HandshakeContext(ctx)
	if cliErr != nil {
		c.Close()
	}
	wg.Wait()
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv, cliErr, srvErr
}

// mustHandshake runs both handshakes and fails the test on an error.
func mustHandshake(t testing.TB, serverCfg, clientCfg *Config) (cli, srv *Conn) {
	t.Helper()
	cli, srv, cerr, serr := handshakePair(t, serverCfg, clientCfg)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	return cli, srv
}

// exchange sends msg from a to b and back, checking both arrive.
func exchange(t testing.TB, a, b *Conn, msg []byte) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(b, buf); err != nil {
			errc <- err
			return
		}
		_, err := b.Write(buf)
		errc <- err
	}()
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(a, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if string(got) != string(msg) {
		t.Fatal("echoed data differs")
	}
}

// alertOf returns the alert an error carries, and whether it came from
// the peer.
func alertOf(err error) (Alert, bool, bool) {
	var ae *AlertError
	if errors.As(err, &ae) {
		return ae.Alert, ae.Remote, true
	}
	return 0, false, false
}

// fakeAddrConn is the part of a net.Conn that a replayed connection does
// not use.
type fakeAddrConn struct{}

func (fakeAddrConn) Close() error                     { return nil }
func (fakeAddrConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (fakeAddrConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (fakeAddrConn) SetDeadline(time.Time) error      { return nil }
func (fakeAddrConn) SetReadDeadline(time.Time) error  { return nil }
func (fakeAddrConn) SetWriteDeadline(time.Time) error { return nil }

// requireHybrid skips a test that needs curveSM2MLKEM768 on a CPU where
// this build leaves the hybrid out (mlkemUsable).
func requireHybrid(t *testing.T) {
	t.Helper()
	if !mlkemUsable {
		t.Skip("curveSM2MLKEM768 is disabled on this CPU: gmsm's ML-KEM code needs the ARMv8.1 SQRDMLAH instruction")
	}
}

package tlcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// localPipe returns both ends of a loopback TCP connection.
func localPipe(t testing.TB) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return client, r.c
}

// handshakePair runs both handshakes and returns the connections, or the
// errors of each side.
func handshakePair(t testing.TB, ccfg, scfg *Config) (*Conn, *Conn, error, error) {
	t.Helper()
	c, s := localPipe(t)
	client := Client(c, ccfg)
	server := Server(s, scfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		serr = server.HandshakeContext(ctx)
		if serr != nil {
			s.Close()
		}
	}()
	cerr := client.HandshakeContext(ctx)
	if cerr != nil {
		c.Close()
	}
	<-done
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, cerr, serr
}

var allSuites = []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3}

func suiteConfigs(t testing.TB, suite uint16, clientAuth bool) (*Config, *Config) {
	p := getPKI(t)
	ccfg := clientConfig(t)
	ccfg.CipherSuites = []uint16{suite}
	scfg := serverConfig(t)
	if clientAuth || cipherSuiteByID(suite).ecdhe {
		ccfg.Certificates = []Certificate{p.client}
	}
	if clientAuth {
		scfg.ClientAuth = RequireAndVerifyClientCert
	}
	return ccfg, scfg
}

func TestRoundTripAllSuites(t *testing.T) {
	for _, suite := range allSuites {
		for _, auth := range []bool{false, true} {
			name := fmt.Sprintf("%s/clientAuth=%v", CipherSuiteName(suite), auth)
			t.Run(name, func(t *testing.T) {
				ccfg, scfg := suiteConfigs(t, suite, auth)
				client, server, cerr, serr := handshakePair(t, ccfg, scfg)
				if cerr != nil || serr != nil {
					t.Fatalf("handshake: client %v, server %v", cerr, serr)
				}
				cs, ss := client.ConnectionState(), server.ConnectionState()
				if cs.CipherSuite != suite || ss.CipherSuite != suite {
					t.Fatalf("suite: client %s, server %s, want %s", CipherSuiteName(cs.CipherSuite), CipherSuiteName(ss.CipherSuite), CipherSuiteName(suite))
				}
				if cs.Version != VersionTLCP || !cs.HandshakeComplete || cs.DidResume {
					t.Fatalf("client state %+v", cs)
				}
				if len(cs.PeerCertificates) != 2 || cs.PeerCertificates[0].Subject.CommonName != "server.test" {
					t.Fatalf("client sees %d peer certificates", len(cs.PeerCertificates))
				}
				if len(cs.VerifiedChains) == 0 {
					t.Fatal("client has no verified chain")
				}
				// Without client authentication, the certificates the ECDHE
				// suites need are not the client's identity.
				wantClientCerts := 0
				if auth {
					wantClientCerts = 2
				}
				if len(ss.PeerCertificates) != wantClientCerts {
					t.Fatalf("server sees %d client certificates, want %d", len(ss.PeerCertificates), wantClientCerts)
				}
				if auth && len(ss.VerifiedChains) == 0 {
					t.Fatal("server did not verify the client chain")
				}
				exchange(t, client, server, 100)
			})
		}
	}
}

// exchange sends n bytes each way at once and checks them.
func exchange(t *testing.T, client, server *Conn, n int) {
	t.Helper()
	up := make([]byte, n)
	down := make([]byte, n)
	rand.Read(up)
	rand.Read(down)
	var wg sync.WaitGroup
	var serverGot []byte
	var serverErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		serverGot = make([]byte, n)
		_, serverErr = io.ReadFull(server, serverGot)
	}()
	go func() {
		defer wg.Done()
		if _, err := server.Write(down); err != nil {
			t.Errorf("server write: %v", err)
		}
	}()
	if _, err := client.Write(up); err != nil {
		t.Fatalf("client write: %v", err)
	}
	clientGot := make([]byte, n)
	if _, err := io.ReadFull(client, clientGot); err != nil {
		t.Fatalf("client read: %v", err)
	}
	wg.Wait()
	if serverErr != nil {
		t.Fatalf("server read: %v", serverErr)
	}
	if !bytes.Equal(serverGot, up) || !bytes.Equal(clientGot, down) {
		t.Fatal("data corrupted in transit")
	}
}

func TestLargeTransferAndHalfClose(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatalf("handshake: client %v, server %v", cerr, serr)
			}
			// 1 MiB + 123 bytes each way, at the same time.
			exchange(t, client, server, 1<<20+123)

			// Half-close: the client ends its side and still reads the
			// server's answer, which the server writes after seeing EOF.
			payload := make([]byte, 300000)
			rand.Read(payload)
			errc := make(chan error, 1)
			go func() {
				got, err := io.ReadAll(server)
				if err != nil {
					errc <- fmt.Errorf("server ReadAll: %w", err)
					return
				}
				if !bytes.Equal(got, payload) {
					errc <- errors.New("server got wrong data")
					return
				}
				if _, err := server.Write([]byte("bye after EOF")); err != nil {
					errc <- err
					return
				}
				errc <- server.Close()
			}()
			if _, err := client.Write(payload); err != nil {
				t.Fatal(err)
			}
			if err := client.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if _, err := client.Write([]byte("x")); err == nil {
				t.Fatal("Write after CloseWrite succeeded")
			}
			got, err := io.ReadAll(client)
			if err != nil {
				t.Fatalf("client ReadAll: %v", err)
			}
			if string(got) != "bye after EOF" {
				t.Fatalf("client got %q", got)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloseNotifyAfterPeerEnded checks which records Close leaves on the
// wire: no close_notify for a peer that ended its side (with close_notify
// or a bare TCP close) before any data was written to it, close_notify
// otherwise.
func TestCloseNotifyAfterPeerEnded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		peerEnds  string // "close_notify", "eof" or "" (the server closes first)
		writeData bool
		want      []recordType
	}{
		{"peer close_notify, nothing written", "close_notify", false, nil},
		{"peer EOF, nothing written", "eof", false, nil},
		{"peer close_notify after data", "close_notify", true, []recordType{recordTypeApplicationData, recordTypeAlert}},
		{"peer EOF after data", "eof", true, []recordType{recordTypeApplicationData, recordTypeAlert}},
		{"server closes first", "", false, []recordType{recordTypeAlert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatalf("handshake: client %v, server %v", cerr, serr)
			}
			if tc.writeData {
				if _, err := server.Write([]byte("hi")); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.peerEnds {
			case "close_notify":
				if err := client.CloseWrite(); err != nil {
					t.Fatal(err)
				}
			case "eof":
				if err := client.NetConn().(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.peerEnds != "" {
				if n, err := server.Read(make([]byte, 10)); n != 0 || err != io.EOF {
					t.Fatalf("server Read = %d, %v; want 0, EOF", n, err)
				}
			}
			if err := server.Close(); err != nil {
				t.Fatal(err)
			}
			client.NetConn().SetReadDeadline(time.Now().Add(10 * time.Second))
			raw, err := io.ReadAll(client.NetConn())
			if err != nil {
				t.Fatal(err)
			}
			got, _, raw := wireRecords(t, raw)
			if len(raw) != 0 || !slices.Equal(got, tc.want) {
				t.Fatalf("records after the handshake: %v (left %x), want %v", got, raw, tc.want)
			}
		})
	}
}

// TestServerPrefersItsOwnOrder: a client that offers the server's two
// first suites the other way round gets the server's first. The server's
// default order depends on the CPU (PreferredCipherSuites).
func TestServerPrefersItsOwnOrder(t *testing.T) {
	first, second := DefaultCipherSuites[0], DefaultCipherSuites[1]
	ccfg := clientConfig(t)
	ccfg.CipherSuites = []uint16{second, first}
	scfg := serverConfig(t)
	client, _, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	if got := client.ConnectionState().CipherSuite; got != first {
		t.Fatalf("negotiated %s, want the server's first choice %s", CipherSuiteName(got), CipherSuiteName(first))
	}
}

func TestHandshakeContextCancel(t *testing.T) {
	c, s := localPipe(t)
	defer s.Close()
	client := Client(c, clientConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The server never answers.
	err := client.HandshakeContext(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
}

func TestDialAndListen(t *testing.T) {
	l, err := Listen("tcp", "127.0.0.1:0", serverConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := serveOne(l, func(c net.Conn) error {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		_, err := c.Write(bytes.ToUpper(buf))
		return err
	})
	cfg := clientConfig(t)
	cfg.ServerName = ""
	_, port, _ := net.SplitHostPort(l.Addr().String())
	conn, err := DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort("localhost", port), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "HELLO" {
		t.Fatalf("got %q", buf)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

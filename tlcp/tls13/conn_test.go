package tls13

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gmtls13 "github.com/emmansun/gmsm/tls13"
)

func TestKeyUpdate(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, []byte("before"))
	// Both directions: the client updates its keys and asks the server
	// to update too; then the server updates on its own.
	if err := cli.KeyUpdate(true); err != nil {
		t.Fatal(err)
	}
	exchange(t, cli, srv, []byte("after the client's update"))
	if err := srv.KeyUpdate(false); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli, []byte("after the server's update"))
	if cli.out.seq > 2 || srv.out.seq > 3 {
		t.Fatalf("sequence numbers did not restart: client %d, server %d", cli.out.seq, srv.out.seq)
	}
}

func TestKeyUpdateFlood(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, []byte("x"))
	for range maxKeyUpdates + 1 {
		if err := cli.KeyUpdate(false); err != nil {
			t.Fatal(err)
		}
	}
	_, err := srv.Read(make([]byte, 1))
	if a, _, ok := alertOf(err); !ok || a != AlertUnexpectedMessage {
		t.Fatalf("server read after a KeyUpdate flood: %v", err)
	}
}

func TestLargeWrites(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	big := make([]byte, 3<<20+17)
	rand.Read(big)
	exchange(t, cli, srv, big)
	exchange(t, srv, cli, big[:maxPlaintext+1])
}

func TestConcurrentReadWrite(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	const n = 200
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(srv, srv) // echo until the client's close_notify
		srv.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		for range n {
			cli.Write(bytes.Repeat([]byte("y"), 1000))
		}
		cli.CloseWrite()
	}()
	got, err := io.ReadAll(cli)
	if err != nil || len(got) != n*1000 {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	srv.Close()
	wg.Wait()
}

func TestCloseNotify(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, []byte("x"))
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("server read after close_notify: %v", err)
	}
	if _, err := cli.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// cutConn closes its connection once it has read limit bytes: a peer that
// vanishes in the middle of the other side's flight.
type cutConn struct {
	net.Conn
	limit int
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.limit <= 0 {
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.Conn.Read(b[:min(len(b), c.limit)])
	c.limit -= n
	return n, err
}

// countConn counts the bytes read through it.
type countConn struct {
	net.Conn
	n int
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n += n
	return n, err
}

// TestAbruptClose breaks handshakes at many points, from either side; no
// side may hang or leave a goroutine behind (TestMain checks with goleak).
// A cut before the last byte a side reads in a whole handshake (measured
// first: the flights' sizes depend on the group this CPU offers) must
// fail the handshake.
func TestAbruptClose(t *testing.T) {
	handshake := func(cc, sc net.Conn) (cerr, serr error) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		scfg.ClientAuth = RequireAndVerifyClientCert
		ccfg.Certificates = []Certificate{getPKI(t).client}
		srv, cli := Server(sc, scfg), Client(cc, ccfg)
		done := make(chan error, 1)
		go func() {
			err := srv.Handshake()
			srv.Close()
			done <- err
		}()
		cerr = cli.Handshake()
		cli.Close()
		return cerr, <-done
	}
	c, s := tcpPair(t)
	whole := map[bool]*countConn{true: {Conn: c}, false: {Conn: s}}
	if cerr, serr := handshake(whole[true], whole[false]); cerr != nil || serr != nil {
		t.Fatalf("uncut handshake: client %v, server %v", cerr, serr)
	}
	for _, cut := range []int{1, 5, 60, 200, 1000, 1500, 3000} {
		for _, clientCuts := range []bool{true, false} {
			c, s := tcpPair(t)
			var cc, sc net.Conn = c, s
			if clientCuts {
				cc = &cutConn{Conn: c, limit: cut}
			} else {
				sc = &cutConn{Conn: s, limit: cut}
			}
			cerr, serr := handshake(cc, sc)
			if cut < whole[clientCuts].n && cerr == nil && serr == nil {
				t.Fatalf("cut at %d of %d bytes (client %v): both handshakes succeeded", cut, whole[clientCuts].n, clientCuts)
			}
		}
	}
}

func TestHandshakeContextCancel(t *testing.T) {
	c, s := tcpPair(t)
	defer c.Close()
	srv := Server(s, serverConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.HandshakeContext(ctx) }()
	// A slow client: sends nothing. Cancelling must end the handshake.
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("handshake: %v", err)
	}
}

// rawServer sends records to a server and returns the alert it answers
// with.
func rawServer(t *testing.T, cfg *Config, input []byte) (Alert, error) {
	t.Helper()
	c, s := tcpPair(t)
	defer c.Close()
	srv := Server(s, cfg)
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	c.Write(input)
	err := <-done
	srv.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, _ := io.ReadAll(c)
	if len(resp) < 7 || resp[0] != byte(recordTypeAlert) {
		return 0, err
	}
	return Alert(resp[6]), err
}

func record(typ recordType, vers uint16, payload []byte) []byte {
	out := []byte{byte(typ), byte(vers >> 8), byte(vers), byte(len(payload) >> 8), byte(len(payload))}
	return append(out, payload...)
}

func validHello() *clientHelloMsg {
	ch := &clientHelloMsg{
		vers:                legacyVersion,
		random:              make([]byte, 32),
		cipherSuites:        []uint16{TLS_SM4_GCM_SM3},
		compressionMethods:  []uint8{0},
		supportedVersions:   []uint16{VersionTLS13},
		supportedGroups:     []CurveID{CurveSM2},
		signatureAlgorithms: []uint16{SM2SigSM3},
		hasKeyShare:         true,
		keyShares:           []keyShare{{group: CurveSM2, data: bytes.Repeat([]byte{4}, 65)}},
	}
	return ch
}

func TestMalformedClientHellos(t *testing.T) {
	hello := func(edit func(*clientHelloMsg)) []byte {
		ch := validHello()
		edit(ch)
		return record(recordTypeHandshake, 0x0301, ch.marshal())
	}
	for _, tc := range []struct {
		name  string
		input []byte
		want  Alert
	}{
		{"garbage", record(recordTypeHandshake, 0x0301, []byte{1, 0, 0, 3, 9, 9, 9}), AlertDecodeError},
		{"not a hello", record(recordTypeHandshake, 0x0301, []byte{20, 0, 0, 0}), AlertUnexpectedMessage},
		{"application data first", record(recordTypeApplicationData, 0x0303, []byte{1}), AlertUnexpectedMessage},
		{"bad record version", record(recordTypeHandshake, 0x0101, []byte{1}), AlertProtocolVersion},
		{"oversized record", append([]byte{22, 3, 3, 0x40, 0x01}, make([]byte, maxPlaintext+1)...), AlertRecordOverflow},
		{"empty handshake record", record(recordTypeHandshake, 0x0301, nil), AlertUnexpectedMessage},
		{"huge handshake message", record(recordTypeHandshake, 0x0301, []byte{1, 0xff, 0xff, 0xff}), AlertIllegalParameter},
		{"unknown record type", record(99, 0x0303, []byte{1}), AlertUnexpectedMessage},
		{"TLS 1.2 only", hello(func(ch *clientHelloMsg) { ch.supportedVersions = []uint16{0x0303} }), AlertProtocolVersion},
		{"no ShangMi suite", hello(func(ch *clientHelloMsg) { ch.cipherSuites = []uint16{0x1301} }), AlertHandshakeFailure},
		{"no sm2sig_sm3", hello(func(ch *clientHelloMsg) { ch.signatureAlgorithms = []uint16{0x0403} }), AlertHandshakeFailure},
		{"no key_share", hello(func(ch *clientHelloMsg) { ch.hasKeyShare, ch.keyShares = false, nil }), AlertMissingExtension},
		{"compression", hello(func(ch *clientHelloMsg) { ch.compressionMethods = []uint8{1, 0} }), AlertIllegalParameter},
		{"early data", hello(func(ch *clientHelloMsg) { ch.earlyData = true }), AlertUnsupportedExtension},
		{"bad key share", hello(func(ch *clientHelloMsg) {}), AlertIllegalParameter},
		{"duplicate extension", record(recordTypeHandshake, 0x0301, dupExtension(validHello().marshal())), AlertDecodeError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rawServer(t, serverConfig(t), tc.input)
			if err == nil {
				t.Fatal("handshake succeeded")
			}
			if got != tc.want {
				t.Fatalf("alert %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// dupExtension appends a second supported_versions extension to a
// marshaled ClientHello.
func dupExtension(msg []byte) []byte {
	ext := []byte{0, 43, 0, 3, 2, 3, 4}
	out := append(append([]byte{}, msg...), ext...)
	// Fix the handshake length and the extensions length (the last two
	// length fields before the extensions block).
	n := len(out) - 4
	out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
	var ch clientHelloMsg
	ch.unmarshal(msg)
	extStart := 4 + 2 + 32 + 1 + len(ch.sessionID) + 2 + 2*len(ch.cipherSuites) + 1 + len(ch.compressionMethods)
	el := int(out[extStart])<<8 | int(out[extStart+1])
	el += len(ext)
	out[extStart], out[extStart+1] = byte(el>>8), byte(el)
	return out
}

// TestRetryAbuse sends a second ClientHello that does not answer the
// HelloRetryRequest.
func TestRetryAbuse(t *testing.T) {
	requireHybrid(t)
	cfg := serverConfig(t)
	cfg.CurvePreferences = []CurveID{CurveSM2MLKEM768}
	first := validHello()
	first.supportedGroups = []CurveID{CurveSM2, CurveSM2MLKEM768}
	second := validHello()
	second.supportedGroups = first.supportedGroups // share still curveSM2
	input := append(record(recordTypeHandshake, 0x0301, first.marshal()), record(recordTypeHandshake, 0x0303, second.marshal())...)
	c, s := tcpPair(t)
	defer c.Close()
	srv := Server(s, cfg)
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	c.Write(input)
	err := <-done
	if a, _, ok := alertOf(err); !ok || a != AlertIllegalParameter {
		t.Fatalf("server: %v", err)
	}
}

func TestClientRejectsBadServerHellos(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*serverHelloMsg)
		want Alert
	}{
		{"TLS 1.2", func(sh *serverHelloMsg) { sh.supportedVersion = 0 }, AlertProtocolVersion},
		{"downgrade canary", func(sh *serverHelloMsg) {
			sh.supportedVersion = 0
			copy(sh.random[24:], downgradeCanaryTLS12)
		}, AlertIllegalParameter},
		{"suite not offered", func(sh *serverHelloMsg) { sh.cipherSuite = 0x1301 }, AlertIllegalParameter},
		{"session ID not echoed", func(sh *serverHelloMsg) { sh.sessionID = nil }, AlertIllegalParameter},
		{"group not sent", func(sh *serverHelloMsg) { sh.serverShare.group = CurveSM2MLKEM768 }, AlertIllegalParameter},
		{"PSK not offered", func(sh *serverHelloMsg) { sh.hasPSK = true }, AlertIllegalParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := tcpPair(t)
			defer s.Close()
			ccfg := clientConfig(t)
			ccfg.CurvePreferences = []CurveID{CurveSM2}
			cli := Client(c, ccfg)
			defer cli.Close()
			done := make(chan error, 1)
			go func() { done <- cli.Handshake() }()
			// Read the ClientHello record and answer it.
			hdr := make([]byte, 5)
			io.ReadFull(s, hdr)
			body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
			io.ReadFull(s, body)
			var ch clientHelloMsg
			if !ch.unmarshal(body) {
				t.Fatal("client sent a malformed hello")
			}
			sh := &serverHelloMsg{
				vers: legacyVersion, random: make([]byte, 32), sessionID: ch.sessionID,
				cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: VersionTLS13,
				serverShare: keyShare{group: CurveSM2, data: ch.keyShares[0].data},
			}
			tc.edit(sh)
			s.Write(record(recordTypeHandshake, 0x0303, sh.marshal()))
			err := <-done
			if a, _, ok := alertOf(err); !ok || a != tc.want {
				t.Fatalf("client: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestTamperedRecord flips a bit of a protected record on the wire.
func TestTamperedRecord(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, []byte("x"))
	cli.out.Lock()
	rec, err := cli.sealRecord(nil, recordTypeApplicationData, []byte("hello"))
	cli.out.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	rec[len(rec)-1] ^= 1
	cli.conn.Write(rec)
	_, err = srv.Read(make([]byte, 10))
	if a, _, ok := alertOf(err); !ok || a != AlertBadRecordMAC {
		t.Fatalf("server: %v", err)
	}
}

// TestCCMSealInPlace checks the CCM suite's AEAD seals in place as it
// does into a fresh buffer (see copyingSeal).
func TestCCMSealInPlace(t *testing.T) {
	aead, err := aeadSM4CCM(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, 12)
	plain := []byte("a record's inner plaintext")
	want := aead.Seal(nil, nonce, plain, []byte("hdr"))
	buf := append([]byte{}, plain...)
	got := aead.Seal(buf[:0], nonce, buf, []byte("hdr"))
	if !bytes.Equal(got, want) {
		t.Fatal("sealing in place differs")
	}
	if _, err := aead.Open(nil, nonce, got, []byte("hdr")); err != nil {
		t.Fatal(err)
	}
}

// TestClientRejectsSuiteChangeAfterRetry: the ServerHello after a
// HelloRetryRequest must keep the retry's suite (RFC 8446 §4.1.4).
func TestClientRejectsSuiteChangeAfterRetry(t *testing.T) {
	requireHybrid(t)
	c, s := tcpPair(t)
	defer s.Close()
	ccfg := clientConfig(t)
	ccfg.CurvePreferences = []CurveID{CurveSM2, CurveSM2MLKEM768}
	cli := Client(c, ccfg)
	defer cli.Close()
	done := make(chan error, 1)
	go func() { done <- cli.Handshake() }()
	readHello := func() *clientHelloMsg {
		for {
			hdr := make([]byte, 5)
			if _, err := io.ReadFull(s, hdr); err != nil {
				t.Fatal(err)
			}
			body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
			io.ReadFull(s, body)
			if recordType(hdr[0]) == recordTypeChangeCipherSpec {
				continue
			}
			var ch clientHelloMsg
			if !ch.unmarshal(body) {
				t.Fatal("client sent a malformed hello")
			}
			return &ch
		}
	}
	ch := readHello()
	hrr := &serverHelloMsg{vers: legacyVersion, random: helloRetryRequestRandom, sessionID: ch.sessionID,
		cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: VersionTLS13, selectedGroup: CurveSM2MLKEM768}
	s.Write(record(recordTypeHandshake, 0x0303, hrr.marshal()))
	ch2 := readHello()
	if len(ch2.keyShares) != 1 || ch2.keyShares[0].group != CurveSM2MLKEM768 {
		t.Fatalf("second hello shares %v", ch2.keyShares)
	}
	kex, _ := gmtls13.NewKeyExchange(gmtls13.SM2MLKEM768)
	_, share, err := kex.ServerSharedSecret(rand.Reader, ch2.keyShares[0].data)
	if err != nil {
		t.Fatal(err)
	}
	sh := &serverHelloMsg{vers: legacyVersion, random: make([]byte, 32), sessionID: ch.sessionID,
		cipherSuite: TLS_SM4_CCM_SM3, supportedVersion: VersionTLS13,
		serverShare: keyShare{group: CurveSM2MLKEM768, data: share.Data}}
	s.Write(record(recordTypeHandshake, 0x0303, sh.marshal()))
	s.(*net.TCPConn).CloseWrite() // a client that goes on reads EOF
	err = <-done
	if a, _, ok := alertOf(err); !ok || a != AlertIllegalParameter {
		t.Fatalf("client: %v", err)
	}
}

// TestIdleConnectionHoldsNoBuffers: after a handshake and an exchange of
// large writes, neither side keeps an input or output buffer.
func TestIdleConnectionHoldsNoBuffers(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, bytes.Repeat([]byte("z"), 200000))
	for name, c := range map[string]*Conn{"client": cli, "server": srv} {
		c.in.Lock()
		in := c.rawBuf != nil || c.hand.Cap() > 0
		c.in.Unlock()
		c.out.Lock()
		out := c.sendPtr != nil || c.sendBuf != nil
		c.out.Unlock()
		if in || out {
			t.Errorf("%s holds buffers: input %v, output %v", name, in, out)
		}
	}
}

package tlcp

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// assertAlert checks that the side that detected the problem sent want and
// that the other side received it.
func assertAlert(t *testing.T, local, remote error, want Alert) {
	t.Helper()
	var le, re *AlertError
	if !errors.As(local, &le) || le.Remote || le.Alert != want {
		t.Fatalf("detecting side: got %v, want sent alert %q", local, want)
	}
	if !errors.As(remote, &re) || !re.Remote || re.Alert != want {
		t.Fatalf("other side: got %v, want received alert %q", remote, want)
	}
}

func TestClientRejectsUnknownCA(t *testing.T) {
	ccfg := clientConfig(t)
	ccfg.RootCAs = getPKI(t).other
	_, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t))
	assertAlert(t, cerr, serr, AlertUnknownCA)
}

func TestClientRejectsHostnameMismatch(t *testing.T) {
	ccfg := clientConfig(t)
	ccfg.ServerName = "other.test"
	_, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t))
	assertAlert(t, cerr, serr, AlertBadCertificate)
	if !strings.Contains(cerr.Error(), "other.test") {
		t.Fatalf("error does not name the host: %v", cerr)
	}
}

func TestInsecureSkipVerifyOnlyWhenAsked(t *testing.T) {
	ccfg := clientConfig(t)
	ccfg.RootCAs = getPKI(t).other
	ccfg.InsecureSkipVerify = true
	_, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t))
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
}

// TestClientWithoutConfig: a client made with a nil Config fails its
// handshake with the error that says what to set, as crypto/tls does,
// instead of panicking.
func TestClientWithoutConfig(t *testing.T) {
	c, s := localPipe(t)
	defer c.Close()
	defer s.Close()
	err := Client(c, nil).Handshake()
	if err == nil || !strings.Contains(err.Error(), "ServerName or InsecureSkipVerify") {
		t.Fatalf("got %v, want the error that asks for ServerName or InsecureSkipVerify", err)
	}
}

// tamperingSigner signs something other than what it is asked to.
type tamperingSigner struct{ k *sm2.PrivateKey }

func (s tamperingSigner) Public() crypto.PublicKey { return s.k.Public() }

func (s tamperingSigner) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	m := bytes.Clone(msg)
	m[len(m)-1] ^= 1
	return s.k.Sign(r, m, opts)
}

func TestClientRejectsBadServerKeyExchangeSignature(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			cert := getPKI(t).server
			cert.SignKey = tamperingSigner{cert.SignKey.(*sm2.PrivateKey)}
			scfg.Certificates = []Certificate{cert}
			_, _, cerr, serr := handshakePair(t, ccfg, scfg)
			assertAlert(t, cerr, serr, AlertDecryptError)
		})
	}
}

// failingDecrypter is an encryption key whose device fails.
type failingDecrypter struct{ k *sm2.PrivateKey }

func (d failingDecrypter) Public() crypto.PublicKey { return d.k.Public() }

func (d failingDecrypter) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("the device of libsdf.so is unavailable: SDR_COMMFAIL")
}

// TestServerDecryptFailureNamesCause: when the encryption key cannot
// decrypt the pre-master secret, the client gets decrypt_error and the
// server's handshake error says why (a failing crypto card is told apart
// from a client's bad ciphertext in the server's log).
func TestServerDecryptFailureNamesCause(t *testing.T) {
	ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
	cert := getPKI(t).server
	cert.EncKey = failingDecrypter{cert.EncKey.(*sm2.PrivateKey)}
	scfg.Certificates = []Certificate{cert}
	_, _, cerr, serr := handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertDecryptError)
	if !strings.Contains(serr.Error(), "cannot decrypt the pre-master secret") || !strings.Contains(serr.Error(), "SDR_COMMFAIL") {
		t.Fatalf("server error %q does not give the key's error", serr)
	}
	if strings.Contains(cerr.Error(), "SDR_COMMFAIL") {
		t.Fatalf("client error %q carries the server's cause", cerr)
	}
}

func TestClientRejectsEncCertWithoutEncryptionUsage(t *testing.T) {
	p := getPKI(t)
	cert := issueDual(t, p.ca, "server.test", []string{"server.test"}, func(sign, enc *smx509.Certificate) {
		enc.KeyUsage = smx509.KeyUsageDigitalSignature
	})
	scfg := serverConfig(t)
	scfg.Certificates = []Certificate{cert}
	_, _, cerr, serr := handshakePair(t, clientConfig(t), scfg)
	assertAlert(t, cerr, serr, AlertUnsupportedCertificate)
}

func TestClientRejectsExpiredCertificate(t *testing.T) {
	ccfg := clientConfig(t)
	ccfg.Time = func() time.Time { return time.Now().Add(48 * time.Hour) }
	_, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t))
	assertAlert(t, cerr, serr, AlertCertificateExpired)
}

func TestNoCommonSuite(t *testing.T) {
	ccfg := clientConfig(t)
	ccfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
	scfg := serverConfig(t)
	scfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
	_, _, cerr, serr := handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertHandshakeFailure)
}

// corruptingConn flips one byte of the nth Write after arming.
type corruptingConn struct {
	net.Conn
	mu    sync.Mutex
	armed bool
}

func (c *corruptingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.armed && len(b) > recordHeaderLen+10 {
		b = bytes.Clone(b)
		b[len(b)-5] ^= 0x40
		c.armed = false
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func TestTamperedRecordIsBadRecordMAC(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			c, s := localPipe(t)
			cc := &corruptingConn{Conn: c}
			client, server := Client(cc, ccfg), Server(s, scfg)
			defer client.Close()
			defer server.Close()
			errc := make(chan error, 1)
			go func() {
				buf := make([]byte, 100)
				_, err := server.Read(buf)
				errc <- err
			}()
			if err := client.Handshake(); err != nil {
				t.Fatal(err)
			}
			cc.mu.Lock()
			cc.armed = true
			cc.mu.Unlock()
			if _, err := client.Write([]byte("a record that will be tampered with on the way")); err != nil {
				t.Fatal(err)
			}
			serr := <-errc
			_, cerr := client.Read(make([]byte, 1))
			assertAlert(t, serr, cerr, AlertBadRecordMAC)
		})
	}
}

// Raw-wire helpers: a scripted peer that writes and reads records itself.

func writeRawRecord(t *testing.T, c net.Conn, typ recordType, vers uint16, payload []byte) {
	t.Helper()
	rec := []byte{byte(typ), byte(vers >> 8), byte(vers), byte(len(payload) >> 8), byte(len(payload))}
	if _, err := c.Write(append(rec, payload...)); err != nil {
		t.Fatal(err)
	}
}

// writeRawHandshake writes a handshake message in as many records as it
// needs.
func writeRawHandshake(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	for len(msg) > 0 {
		n := min(len(msg), maxPlaintext)
		writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, msg[:n])
		msg = msg[n:]
	}
}

// readRawRecord reads one unencrypted record.
func readRawRecord(c net.Conn) (recordType, []byte, error) {
	hdr := make([]byte, recordHeaderLen)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return 0, nil, err
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, nil, err
	}
	return recordType(hdr[0]), body, nil
}

// readServerFlight reads the server's first flight, up to ServerHelloDone.
func readServerFlight(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, body, err := readRawRecord(c)
		if err != nil {
			t.Fatal(err)
		}
		if body[0] == typeServerHelloDone {
			return
		}
	}
}

// readRawAlert reads records until an alert and returns its description.
func readRawAlert(t *testing.T, c net.Conn) Alert {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, body, err := readRawRecord(c)
		if err != nil {
			t.Fatalf("reading alert: %v", err)
		}
		if typ == recordTypeAlert {
			if len(body) != 2 {
				t.Fatalf("malformed alert %x", body)
			}
			return Alert(body[1])
		}
	}
}

func rawClientHello(t *testing.T, vers uint16, suites []uint16, sessionID []byte) []byte {
	t.Helper()
	m := &clientHelloMsg{vers: vers, random: make([]byte, 32), sessionID: sessionID, cipherSuites: suites, compressionMethods: []byte{0}}
	rand.Read(m.random)
	b, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveRaw starts a server on one end of a pipe and returns the other end
// and the server's handshake error.
func serveRaw(t *testing.T, cfg *Config) (net.Conn, <-chan error) {
	t.Helper()
	c, s := localPipe(t)
	server := Server(s, cfg)
	errc := make(chan error, 1)
	go func() {
		s.SetDeadline(time.Now().Add(10 * time.Second))
		err := server.Handshake()
		server.Close()
		errc <- err
	}()
	t.Cleanup(func() { c.Close() })
	return c, errc
}

func TestServerRawInputAlerts(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(t *testing.T, c net.Conn)
		want Alert
	}{
		{"TLS 1.2 ClientHello", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, 0x0301, rawClientHello(t, 0x0303, []uint16{0xC02F, 0xC030}, nil))
		}, AlertProtocolVersion},
		{"TLS 1.2 ClientHello offering a TLCP suite", func(t *testing.T, c net.Conn) {
			// A GM-capable TLS client: refused so that it retries in TLCP.
			writeRawRecord(t, c, recordTypeHandshake, 0x0301, rawClientHello(t, 0x0303, []uint16{0xC02F, ECC_SM4_GCM_SM3}, nil))
		}, AlertHandshakeFailure},
		{"unknown suites only", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, rawClientHello(t, VersionTLCP, []uint16{0x1234, 0xC02F}, nil))
		}, AlertHandshakeFailure},
		{"oversized record", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, make([]byte, maxCiphertext+1))
		}, AlertRecordOverflow},
		{"oversized plaintext", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, make([]byte, maxPlaintext+1))
		}, AlertRecordOverflow},
		{"oversized handshake message", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, []byte{typeClientHello, 0x10, 0, 0})
		}, AlertIllegalParameter},
		{"truncated record", func(t *testing.T, c net.Conn) {
			hello := rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_GCM_SM3}, nil)
			rec := append([]byte{byte(recordTypeHandshake), 1, 1, byte(len(hello) >> 8), byte(len(hello))}, hello[:len(hello)/2]...)
			c.Write(rec)
			c.(*net.TCPConn).CloseWrite()
		}, AlertDecodeError},
		{"truncated handshake message", func(t *testing.T, c net.Conn) {
			hello := rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_GCM_SM3}, nil)
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, hello[:len(hello)-3])
			writeRawRecord(t, c, recordTypeApplicationData, VersionTLCP, []byte("data"))
		}, AlertUnexpectedMessage},
		{"malformed ClientHello", func(t *testing.T, c net.Conn) {
			hello := rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_GCM_SM3}, nil)
			hello[4+2+32] = 33 // session ID longer than allowed
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, hello)
		}, AlertDecodeError},
		{"16000 extensions", func(t *testing.T, c net.Conn) {
			exts := make([]helloExtension, 16000)
			for i := range exts {
				exts[i].typ = uint16(0x1000 + i)
			}
			writeRawHandshake(t, c, helloWithExtensions(t, exts...))
		}, AlertDecodeError},
		{"60 KB server name", func(t *testing.T, c net.Conn) {
			writeRawHandshake(t, c, helloWithExtensions(t, sniExtension(strings.Repeat("a", 60000))))
		}, AlertDecodeError},
		{"server name that is not a host name", func(t *testing.T, c net.Conn) {
			writeRawHandshake(t, c, helloWithExtensions(t, sniExtension("a/../b")))
		}, AlertDecodeError},
		{"not a handshake", func(t *testing.T, c net.Conn) {
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		}, AlertUnexpectedMessage},
		{"ChangeCipherSpec first", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeChangeCipherSpec, VersionTLCP, []byte{1})
		}, AlertUnexpectedMessage},
		{"empty handshake record", func(t *testing.T, c net.Conn) {
			writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, nil)
		}, AlertUnexpectedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, errc := serveRaw(t, serverConfig(t))
			tc.send(t, c)
			got := readRawAlert(t, c)
			if got != tc.want {
				t.Fatalf("server sent %q, want %q", got, tc.want)
			}
			var ae *AlertError
			if err := <-errc; !errors.As(err, &ae) || ae.Alert != tc.want || ae.Remote {
				t.Fatalf("server error %v, want one carrying %q", err, tc.want)
			}
		})
	}
}

func TestAbruptCloseDuringHandshake(t *testing.T) {
	// The client vanishes after its ClientHello: the server must return
	// promptly with an error and leak nothing (goleak checks the latter).
	c, errc := serveRaw(t, serverConfig(t))
	writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_GCM_SM3}, nil))
	c.Close()
	if err := <-errc; err == nil {
		t.Fatal("handshake succeeded with a vanished client")
	}
}

func TestSlowClientHitsDeadline(t *testing.T) {
	c, s := localPipe(t)
	defer c.Close()
	server := Server(s, serverConfig(t))
	defer server.Close()
	// Half a record header, then nothing.
	c.Write([]byte{byte(recordTypeHandshake), 1})
	server.SetDeadline(time.Now().Add(100 * time.Millisecond))
	err := server.Handshake()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestRenegotiationRefused(t *testing.T) {
	ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
	client, server, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	// The server asks for renegotiation; the client answers with a
	// no_renegotiation warning and the connection carries on.
	if err := server.writeHandshake(&helloRequestMsg{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "after" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	if _, err := client.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "still" {
		t.Fatalf("server read %q, %v", buf, err)
	}
}

// TestNothingWrittenAfterPeerFatalAlert: once the client has sent a fatal
// alert the server writes nothing more on the connection: no data, no
// alert of its own, no close_notify.
func TestNothingWrittenAfterPeerFatalAlert(t *testing.T) {
	t.Run("established", func(t *testing.T) {
		ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
		c, s := localPipe(t)
		client, server := Client(c, ccfg), Server(s, scfg)
		handshakeBoth(t, client, server)
		client.sendAlert(AlertInternalError, nil)
		var ae *AlertError
		if _, err := server.Read(make([]byte, 10)); !errors.As(err, &ae) || !ae.Remote || ae.Alert != AlertInternalError {
			t.Fatalf("server Read: %v, want the client's internal error alert", err)
		}
		// What an HTTP server does with a read error: answer, then close.
		if _, err := server.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n")); err == nil {
			t.Error("Write after the peer's fatal alert succeeded")
		}
		if err := server.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
			t.Fatalf("client received %d bytes after its fatal alert (%v)", len(b), err)
		}
		c.Close()
	})
	t.Run("handshake", func(t *testing.T) {
		c, errc := serveRaw(t, serverConfig(t))
		writeRawRecord(t, c, recordTypeHandshake, VersionTLCP, rawClientHello(t, VersionTLCP, []uint16{ECC_SM4_GCM_SM3}, nil))
		readServerFlight(t, c)
		writeRawRecord(t, c, recordTypeAlert, VersionTLCP, []byte{alertLevelError, byte(AlertBadCertificate)})
		var ae *AlertError
		if err := <-errc; !errors.As(err, &ae) || !ae.Remote {
			t.Fatalf("server error %v, want the received alert", err)
		}
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
			t.Fatalf("client received %d bytes after its fatal alert (%v)", len(b), err)
		}
	})
}

// TestKeyAgreementOnlyEncCertificate: an encryption certificate that
// allows only keyAgreement serves the ECDHE suites (SM2 key agreement) but
// not the ECC suites, where the client encrypts the pre-master secret to
// it.
func TestKeyAgreementOnlyEncCertificate(t *testing.T) {
	p := getPKI(t)
	cert := issueDual(t, p.ca, "server.test", []string{"server.test"}, func(sign, enc *smx509.Certificate) {
		enc.KeyUsage = smx509.KeyUsageKeyAgreement
	})
	for _, suite := range allSuites {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			scfg.Certificates = []Certificate{cert}
			_, _, cerr, serr := handshakePair(t, ccfg, scfg)
			if cipherSuiteByID(suite).ecdhe {
				if cerr != nil || serr != nil {
					t.Fatalf("client %v, server %v", cerr, serr)
				}
				return
			}
			assertAlert(t, cerr, serr, AlertUnsupportedCertificate)
			if !strings.Contains(cerr.Error(), "keyEncipherment") {
				t.Errorf("error does not say what the certificate lacks: %v", cerr)
			}
		})
	}
}

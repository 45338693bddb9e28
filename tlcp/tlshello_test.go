package tlcp

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"
)

// replayHandshake runs a ClientWithHello client that sends wire's hello
// against server, made by newServer over the other end of a loopback
// connection. It returns both ends, what the client read, and their
// handshake errors.
func replayHandshake(t *testing.T, wire []byte, ccfg, scfg *Config, newServer func(net.Conn, *Config) *Conn) (*Conn, *Conn, *recordingConn, error, error) {
	t.Helper()
	hello, err := ParseTLSClientHello(wire)
	if err != nil {
		t.Fatal(err)
	}
	c, s := localPipe(t)
	rc := &recordingConn{Conn: c}
	client, err := ClientWithHello(rc, ccfg, hello.RecordVersion, helloMessage(t, wire))
	if err != nil {
		t.Fatal(err)
	}
	server := newServer(s, scfg)
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
	return client, server, rc, cerr, serr
}

// helloMessage reassembles the handshake message from a vector's records.
func helloMessage(t testing.TB, wire []byte) []byte {
	t.Helper()
	var msg []byte
	for len(wire) > 0 {
		n := int(wire[3])<<8 | int(wire[4])
		msg = append(msg, wire[recordHeaderLen:recordHeaderLen+n]...)
		wire = wire[recordHeaderLen+n:]
	}
	return msg
}

// firstServerHello returns the header of the first record the client
// read and the ServerHello in it.
func firstServerHello(t *testing.T, rc *recordingConn) ([]byte, *serverHelloMsg) {
	t.Helper()
	rc.mu.Lock()
	read := slices.Clone(rc.read)
	rc.mu.Unlock()
	if len(read) < recordHeaderLen+4 {
		t.Fatalf("client read %d bytes", len(read))
	}
	body := read[recordHeaderLen:]
	n := int(body[1])<<16 | int(body[2])<<8 | int(body[3])
	var sh serverHelloMsg
	if !sh.unmarshal(body[:4+n]) {
		t.Fatal("the server's first message is not a ServerHello")
	}
	return read[:recordHeaderLen], &sh
}

func TestServerForTLSHelloReplaysVectors(t *testing.T) {
	for _, v := range gmHelloVectors {
		if !v.gmCapable {
			continue
		}
		for _, records := range []int{1, 3} {
			t.Run(v.file+"/records="+string(rune('0'+records)), func(t *testing.T) {
				wire := loadVector(t, v.file)
				if records > 1 {
					wire = splitRecords(wire, records)
				}
				scfg := serverConfig(t)
				scfg.NextProtos = []string{"http/1.1"}
				client, server, rc, cerr, serr := replayHandshake(t, wire, clientConfig(t), scfg, ServerForTLSHello)
				if cerr != nil || serr != nil {
					t.Fatalf("client %v, server %v", cerr, serr)
				}
				st := server.ConnectionState()
				if !st.TLSFormHello || st.Version != VersionTLCP || st.ServerName != chromiumName {
					t.Fatalf("server state %+v", st)
				}
				hello, _ := ParseTLSClientHello(wire)
				if !slices.Contains(hello.TLCPSuites, st.CipherSuite) || client.ConnectionState().CipherSuite != st.CipherSuite {
					t.Fatalf("suite %s, offered %v", CipherSuiteName(st.CipherSuite), hello.TLCPSuites)
				}
				if len(hello.ALPNProtocols) > 0 && st.NegotiatedProtocol != "http/1.1" {
					t.Fatalf("ALPN %q", st.NegotiatedProtocol)
				}
				// The answer is TLCP from its first record on, and it
				// echoes renegotiation_info to a client that asked.
				hdr, sh := firstServerHello(t, rc)
				if hdr[0] != byte(recordTypeHandshake) || hdr[1] != 1 || hdr[2] != 1 || sh.vers != VersionTLCP {
					t.Fatalf("first record %x, ServerHello version %#04x", hdr, sh.vers)
				}
				if !sh.secureRenegotiation {
					t.Fatal("no renegotiation_info in the ServerHello")
				}
				exchange(t, client, server, 40000)
			})
		}
	}
}

// TestTLSHelloTranscriptIsRaw shows that the transcript takes the hello as
// received: the vectors hold what the package would not write (GREASE,
// TLS 1.3 extensions), so a transcript over a re-encoding would fail the
// Finished check that the replay test passes.
func TestTLSHelloTranscriptIsRaw(t *testing.T) {
	msg := helloMessage(t, loadVector(t, "360-chromium86-gm-last.hex"))
	var m clientHelloMsg
	if !m.unmarshal(slices.Clone(msg)) {
		t.Fatal("vector does not parse")
	}
	m.raw = nil
	again, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) == string(msg) {
		t.Fatal("the vector re-encodes identically; it does not show that the transcript is raw")
	}
}

func TestServerForTLSHelloClientAuthAndResumption(t *testing.T) {
	p := getPKI(t)
	scfg := serverConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	scfg.SessionCache = NewLRUSessionCache(8, 0)
	ccfg := clientConfig(t)
	ccfg.Certificates = []Certificate{p.client}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)

	wire := chromium86Hello("resume", chromiumSuites(false, true), nil)
	client, server, _, cerr, serr := replayHandshake(t, wire, ccfg, scfg, ServerForTLSHello)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	st := server.ConnectionState()
	if len(st.VerifiedChains) == 0 || st.DidResume {
		t.Fatalf("full handshake: verified chains %d, resumed %v", len(st.VerifiedChains), st.DidResume)
	}
	id := client.ConnectionState().SessionID
	if len(id) == 0 {
		t.Fatal("no session ID")
	}
	exchange(t, client, server, 100)

	// The same browser comes back with the session in its TLS hello.
	wire = chromium86Hello("resume", chromiumSuites(false, true), id)
	client, server, _, cerr, serr = replayHandshake(t, wire, ccfg, scfg, ServerForTLSHello)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	if st := server.ConnectionState(); !st.DidResume || !client.ConnectionState().DidResume || len(st.VerifiedChains) == 0 || !st.TLSFormHello {
		t.Fatalf("resumption: server %+v", st)
	}
	exchange(t, client, server, 100)

	// A client without a certificate is still refused.
	ccfg2 := clientConfig(t)
	_, _, _, cerr, serr = replayHandshake(t, chromium86Hello("nocert", chromiumSuites(false, true), nil), ccfg2, scfg, ServerForTLSHello)
	if cerr == nil || serr == nil {
		t.Fatal("handshake without a client certificate succeeded")
	}
}

func TestServerForTLSHelloKeepsSuitePolicy(t *testing.T) {
	// The server enables only ECDHE suites, which the 360 hello does not
	// offer: no suite in common, as for a TLCP hello.
	scfg := serverConfig(t)
	scfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
	_, _, _, cerr, serr := replayHandshake(t, loadVector(t, "360-chromium86-gm-last.hex"), clientConfig(t), scfg, ServerForTLSHello)
	var ae *AlertError
	if !errors.As(serr, &ae) || ae.Alert != AlertHandshakeFailure || cerr == nil {
		t.Fatalf("server %v, client %v; want handshake_failure", serr, cerr)
	}
}

// TestTLSHelloRefusals: a TLS hello is refused with the alert that makes
// a GM browser retry in TLCP (handshake_failure) when it offers TLCP
// suites and the server does not take TLS hellos, and with
// protocol_version when it offers none; the alert record carries the
// client's record version, which a TLS client reads.
func TestTLSHelloRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      string
		newServer func(net.Conn, *Config) *Conn
		want      Alert
	}{
		{"Server, 360 hello", "360-chromium86-gm-last.hex", Server, AlertHandshakeFailure},
		{"Server, TLS 1.2 hello with ECC_SM4_CBC_SM3", "tls12-ecc-sm4-cbc-sm3.hex", Server, AlertHandshakeFailure},
		{"Server, hello without TLCP suites", "chromium86-no-gm.hex", Server, AlertProtocolVersion},
		{"ServerForTLSHello, hello without TLCP suites", "chromium86-no-gm.hex", ServerForTLSHello, AlertProtocolVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := loadVector(t, tc.file)
			c, s := localPipe(t)
			t.Cleanup(func() { c.Close() })
			server := tc.newServer(s, serverConfig(t))
			errc := make(chan error, 1)
			go func() {
				s.SetDeadline(time.Now().Add(10 * time.Second))
				err := server.Handshake()
				server.Close()
				errc <- err
			}()
			if _, err := c.Write(wire); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			hdr := make([]byte, recordHeaderLen)
			if _, err := readFull(c, hdr); err != nil {
				t.Fatal(err)
			}
			body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
			if _, err := readFull(c, body); err != nil {
				t.Fatal(err)
			}
			if recordType(hdr[0]) != recordTypeAlert || len(body) != 2 || body[0] != alertLevelError || Alert(body[1]) != tc.want {
				t.Fatalf("server sent record %x %x, want fatal %q", hdr, body, tc.want)
			}
			if hdr[1] != wire[1] || hdr[2] != wire[2] {
				t.Fatalf("alert record version %02x%02x, want the client's %02x%02x", hdr[1], hdr[2], wire[1], wire[2])
			}
			var ae *AlertError
			if err := <-errc; !errors.As(err, &ae) || ae.Alert != tc.want || ae.Remote {
				t.Fatalf("server error %v, want one carrying %q", err, tc.want)
			}
		})
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestParseTLSClientHello(t *testing.T) {
	for _, v := range gmHelloVectors {
		wire := loadVector(t, v.file)
		for _, records := range []int{1, 4} {
			in := wire
			if records > 1 {
				in = splitRecords(wire, records)
			}
			trailing := append(slices.Clone(in), 23, 3, 3, 0, 1, 0) // what follows is not read
			h, err := ParseTLSClientHello(trailing)
			if err != nil {
				t.Fatalf("%s in %d records: %v", v.file, records, err)
			}
			if h.Length != len(in) || h.Version != 0x0303 || h.RecordVersion != uint16(wire[1])<<8|uint16(wire[2]) || h.ServerName != chromiumName || !h.TLSForm() {
				t.Fatalf("%s: %+v", v.file, h)
			}
			if h.GMCapable() != v.gmCapable || (len(h.TLCPSuites) > 0) != v.gmCapable {
				t.Fatalf("%s: GM-capable %v, TLCP suites %v", v.file, h.GMCapable(), h.TLCPSuites)
			}
			for _, id := range h.TLCPSuites {
				if !slices.Contains(h.CipherSuites, id) || cipherSuiteByID(id) == nil {
					t.Fatalf("%s: %#04x is not an offered TLCP suite", v.file, id)
				}
			}
		}
	}
	wire := loadVector(t, "360-chromium86-gm-last.hex")
	for name, bad := range map[string][]byte{
		"empty":             nil,
		"truncated":         wire[:len(wire)-1],
		"header only":       wire[:recordHeaderLen],
		"not handshake":     append([]byte{23}, wire[1:]...),
		"empty record":      {22, 3, 1, 0, 0},
		"not a ClientHello": wrapRecords(0x0301, []byte{typeServerHello, 0, 0, 0}),
		"oversized message": wrapRecords(0x0301, []byte{typeClientHello, 0x10, 0, 0}),
		"versions change":   append(wrapRecords(0x0301, helloMessage(t, wire)[:10]), wrapRecords(0x0303, helloMessage(t, wire)[10:])...),
		"more than hello":   wrapRecords(0x0301, append(helloMessage(t, wire), typeFinished, 0, 0, 0)),
		"malformed":         wrapRecords(0x0301, append([]byte{typeClientHello, 0, 0, 2}, 3, 3)),
		"oversized record":  append([]byte{22, 3, 1, 0x40, 1}, make([]byte, 1<<14+1)...),
		"too many records":  splitRecords(wire, 512),
	} {
		if _, err := ParseTLSClientHello(bad); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestTLCPSuitesIn(t *testing.T) {
	got := TLCPSuitesIn([]uint16{0x0a0a, 0xc02f, ECC_SM4_GCM_SM3, 0x1301, ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3})
	if want := []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := TLCPSuitesIn([]uint16{0xc02f, 0x1301}); got != nil {
		t.Fatalf("got %v for a TLS-only list", got)
	}
}

func TestClientWithHelloRefusesBadInput(t *testing.T) {
	wire := loadVector(t, "chromium86-no-gm.hex")
	c, _ := net.Pipe()
	defer c.Close()
	if _, err := ClientWithHello(c, clientConfig(t), 0x0301, helloMessage(t, wire)); err == nil {
		t.Fatal("a hello without TLCP suites was taken")
	}
	if _, err := ClientWithHello(c, clientConfig(t), 0x0301, []byte{1, 0, 0, 1, 0}); err == nil {
		t.Fatal("a malformed hello was taken")
	}
	gm := helloMessage(t, loadVector(t, "360-chromium86-gm-last.hex"))
	if _, err := ClientWithHello(c, clientConfig(t), 0x0202, gm); err == nil {
		t.Fatal("record version 0x0202 was taken")
	}
}

func FuzzParseTLSClientHello(f *testing.F) {
	for _, v := range gmHelloVectors {
		wire := loadVector(f, v.file)
		f.Add(wire)
		f.Add(splitRecords(wire, 3))
	}
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseTLSClientHello(data)
		if err != nil {
			return
		}
		if h.Length > len(data) || len(h.CipherSuites) == 0 {
			t.Fatalf("parsed %+v from %d bytes", h, len(data))
		}
		for _, id := range h.TLCPSuites {
			if !slices.Contains(h.CipherSuites, id) {
				t.Fatalf("TLCP suite %#04x not among %v", id, h.CipherSuites)
			}
		}
		// What parses here is a hello the server reads the same way.
		var m clientHelloMsg
		if !m.unmarshal(helloMessage(t, data[:h.Length])) {
			t.Fatal("the server's parser refuses what ParseTLSClientHello took")
		}
	})
}

package tls13

import (
	"bytes"
	"testing"
	"time"
)

// Fuzz targets for every parser of peer input. Each checks that a parser
// never panics and that what it accepts marshals back into something it
// accepts again, unchanged.

type wireMessage interface {
	marshal() []byte
	unmarshal([]byte) bool
}

func fuzzRoundTrip(t *testing.T, data []byte, fresh func() wireMessage) {
	m := fresh()
	if !m.unmarshal(data) {
		return
	}
	out := m.marshal()
	m2 := fresh()
	if !m2.unmarshal(out) {
		t.Fatalf("marshaled message does not parse: %x", out)
	}
	if out2 := m2.marshal(); !bytes.Equal(out, out2) {
		t.Fatalf("round trip changed the message:\n%x\n%x", out, out2)
	}
}

func seedHello() *clientHelloMsg {
	ch := validHello()
	ch.sessionID = bytes.Repeat([]byte{7}, 32)
	ch.serverName = "server.test"
	ch.alpnProtocols = []string{"h2", "http/1.1"}
	ch.pskModes = []uint8{pskModeDHE}
	ch.supportedGroups = []CurveID{CurveSM2MLKEM768, CurveSM2}
	ch.cookie = []byte("cookie")
	ch.pskIdentities = []pskIdentity{{label: []byte("ticket"), age: 9}}
	ch.pskBinders = [][]byte{make([]byte, 32)}
	return ch
}

func FuzzClientHello(f *testing.F) {
	f.Add(validHello().marshal())
	f.Add(seedHello().marshal())
	f.Add(dupExtension(validHello().marshal()))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(clientHelloMsg) })
		// The edge's routing decision must not panic either.
		if info, ok := ParseClientHello(data); ok {
			OffersShangMi(info)
			OffersOnlyShangMi(info)
		}
	})
}

func FuzzServerHello(f *testing.F) {
	f.Add((&serverHelloMsg{vers: legacyVersion, random: make([]byte, 32), sessionID: []byte{1}, cipherSuite: TLS_SM4_GCM_SM3,
		supportedVersion: VersionTLS13, serverShare: keyShare{group: CurveSM2, data: []byte{4, 5}}, hasPSK: true}).marshal())
	f.Add((&serverHelloMsg{vers: legacyVersion, random: helloRetryRequestRandom, cipherSuite: TLS_SM4_GCM_SM3,
		supportedVersion: VersionTLS13, selectedGroup: CurveSM2MLKEM768, cookie: []byte("c")}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(serverHelloMsg) })
	})
}

func FuzzEncryptedExtensions(f *testing.F) {
	f.Add((&encryptedExtensionsMsg{alpnProtocol: "h2", serverNameAck: true}).marshal())
	f.Add((&encryptedExtensionsMsg{}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(encryptedExtensionsMsg) })
	})
}

func FuzzCertificateRequest(f *testing.F) {
	f.Add((&certificateRequestMsg{signatureAlgorithms: []uint16{SM2SigSM3}, certificateAuthorities: [][]byte{[]byte("dn")}}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(certificateRequestMsg) })
	})
}

func FuzzCertificate(f *testing.F) {
	f.Add((&certificateMsg{certificates: [][]byte{getPKI(f).server.Certificate[0], {1, 2}}}).marshal())
	f.Add((&certificateMsg{}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(certificateMsg) })
	})
}

func FuzzCertificateVerify(f *testing.F) {
	f.Add((&certificateVerifyMsg{scheme: SM2SigSM3, signature: []byte{0x30, 0}}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(certificateVerifyMsg) })
	})
}

func FuzzFinished(f *testing.F) {
	f.Add((&finishedMsg{verifyData: make([]byte, 32)}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(finishedMsg) })
	})
}

func FuzzNewSessionTicket(f *testing.F) {
	f.Add((&newSessionTicketMsg{lifetime: 3600, ageAdd: 7, nonce: []byte{1}, label: []byte("ticket")}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(newSessionTicketMsg) })
	})
}

func FuzzKeyUpdate(f *testing.F) {
	f.Add((&keyUpdateMsg{updateRequested: true}).marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func() wireMessage { return new(keyUpdateMsg) })
	})
}

func FuzzSessionState(f *testing.F) {
	st := &SessionState{CipherSuite: TLS_SM4_GCM_SM3, PSK: make([]byte, 32), CreatedAt: time.Unix(1700000000, 0),
		Lifetime: time.Hour, PeerCertificates: [][]byte{{1}}, ServerName: "a", ALPN: "h2", Verified: true}
	b, _ := st.Marshal()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseSessionState(data)
		if err != nil {
			return
		}
		out, err := st.Marshal()
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("session state does not round-trip: %v", err)
		}
	})
}

// FuzzServerHandshake feeds a server whatever a client may send first.
func FuzzServerHandshake(f *testing.F) {
	f.Add(record(recordTypeHandshake, 0x0301, validHello().marshal()))
	f.Add(record(recordTypeHandshake, 0x0301, seedHello().marshal()))
	f.Add(append(record(recordTypeHandshake, 0x0301, validHello().marshal()), record(recordTypeChangeCipherSpec, 0x0303, []byte{1})...))
	cfg := serverConfig(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Server(&replayConn{in: bytes.NewReader(data)}, cfg)
		c.Handshake()
		c.Close()
	})
}

// replayConn reads from a fixed input and discards what is written.
type replayConn struct {
	fakeAddrConn
	in *bytes.Reader
}

func (r *replayConn) Read(b []byte) (int, error)  { return r.in.Read(b) }
func (r *replayConn) Write(b []byte) (int, error) { return len(b), nil }

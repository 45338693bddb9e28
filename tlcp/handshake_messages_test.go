package tlcp

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// Round trips: every message marshals and unmarshals back to itself.

var roundTripTypes = []handshakeMessage{
	&clientHelloMsg{},
	&serverHelloMsg{},
	&certificateMsg{},
	&serverKeyExchangeMsg{},
	&certificateRequestMsg{},
	&serverHelloDoneMsg{},
	&helloRequestMsg{},
	&clientKeyExchangeMsg{},
	&certificateVerifyMsg{},
	&finishedMsg{},
	&certificateStatusMsg{},
}

func TestMarshalUnmarshal(t *testing.T) {
	rnd := mrand.New(mrand.NewSource(1))
	for _, m := range roundTripTypes {
		ty := reflect.ValueOf(m).Type()
		t.Run(ty.Elem().Name(), func(t *testing.T) {
			for i := 0; i < 200; i++ {
				v, ok := quick.Value(ty, rnd)
				if !ok {
					t.Fatalf("cannot generate %s", ty)
				}
				m1 := v.Interface().(handshakeMessage)
				data, err := m1.marshal()
				if err != nil {
					t.Fatalf("marshal %#v: %v", m1, err)
				}
				m2 := reflect.New(ty.Elem()).Interface().(handshakeMessage)
				if !m2.unmarshal(data) {
					t.Fatalf("unmarshal of marshaled %#v failed", m1)
				}
				clearRaw(m1)
				clearRaw(m2)
				if !reflect.DeepEqual(m1, m2) {
					t.Fatalf("round trip:\n got %#v\nwant %#v", m2, m1)
				}
				// Every strict prefix must be rejected without panicking.
				for j := 0; j < len(data); j++ {
					if m2.unmarshal(data[:j]) {
						t.Fatalf("unmarshal accepted a %d-byte prefix of %d", j, len(data))
					}
				}
			}
		})
	}
}

// The messages a handshake builds in a shared buffer append exactly what
// marshal returns, after what the buffer held, and keep no reference to
// the buffer; a message that was parsed appends its bytes as received.
func TestAppendToMatchesMarshal(t *testing.T) {
	rnd := mrand.New(mrand.NewSource(2))
	for _, m := range roundTripTypes {
		ty := reflect.ValueOf(m).Type()
		if _, ok := m.(messageAppender); !ok {
			continue
		}
		t.Run(ty.Elem().Name(), func(t *testing.T) {
			for i := 0; i < 100; i++ {
				v, ok := quick.Value(ty, rnd)
				if !ok {
					t.Fatalf("cannot generate %s", ty)
				}
				m := v.Interface().(handshakeMessage)
				before := reflect.New(ty.Elem())
				before.Elem().Set(reflect.ValueOf(m).Elem())
				prefix := []byte("prefix")
				out, err := m.(messageAppender).appendTo(append(make([]byte, 0, 8), prefix...))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out[:len(prefix)], prefix) {
					t.Fatalf("appendTo overwrote the buffer's %q: %q", prefix, out[:len(prefix)])
				}
				// appendTo kept nothing: the message is as generated.
				if !reflect.DeepEqual(before.Interface(), m) {
					t.Fatalf("appendTo changed the message: %#v", m)
				}
				want, err := m.marshal()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out[len(prefix):], want) {
					t.Fatalf("appendTo wrote %x, marshal %x", out[len(prefix):], want)
				}
				parsed := reflect.New(ty.Elem()).Interface().(handshakeMessage)
				if !parsed.unmarshal(want) {
					t.Fatal("unmarshal failed")
				}
				again, err := parsed.(messageAppender).appendTo(nil)
				if err != nil || !bytes.Equal(again, want) {
					t.Fatalf("a parsed message appends %x, %v; want %x", again, err, want)
				}
			}
		})
	}
}

func clearRaw(m handshakeMessage) {
	switch m := m.(type) {
	case *clientHelloMsg:
		m.raw = nil
	case *serverHelloMsg:
		m.raw = nil
	case *certificateMsg:
		m.raw = nil
	case *serverKeyExchangeMsg:
		m.raw = nil
	case *certificateRequestMsg:
		m.raw = nil
	case *clientKeyExchangeMsg:
		m.raw = nil
	case *certificateVerifyMsg:
		m.raw = nil
	case *finishedMsg:
		m.raw = nil
	case *certificateStatusMsg:
		m.raw = nil
	}
}

func randBytes(r *mrand.Rand, min, max int) []byte {
	b := make([]byte, min+r.Intn(max-min+1))
	r.Read(b)
	return b
}

func randString(r *mrand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 1+r.Intn(n))
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return string(b)
}

func (*clientHelloMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	m := &clientHelloMsg{vers: uint16(r.Intn(math.MaxUint16)), random: randBytes(r, 32, 32), sessionID: randBytes(r, 0, 32)}
	for i := 0; i < 1+r.Intn(6); i++ {
		m.cipherSuites = append(m.cipherSuites, uint16(r.Intn(math.MaxUint16)))
	}
	m.compressionMethods = randBytes(r, 1, 3)
	if r.Intn(2) == 0 {
		m.serverName = randString(r, 40)
		m.extensionTypes = append(m.extensionTypes, extensionServerName)
		m.hasExtensions = true
	}
	if r.Intn(2) == 0 {
		for i := 0; i < 1+r.Intn(3); i++ {
			m.alpnProtocols = append(m.alpnProtocols, randString(r, 10))
		}
		m.extensionTypes = append(m.extensionTypes, extensionALPN)
		m.hasExtensions = true
	}
	if r.Intn(2) == 0 {
		m.ocspStapling = true
		m.extensionTypes = append(m.extensionTypes, extensionStatusRequest)
		m.hasExtensions = true
	}
	return reflect.ValueOf(m)
}

func (*serverHelloMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	m := &serverHelloMsg{vers: uint16(r.Intn(math.MaxUint16)), random: randBytes(r, 32, 32), sessionID: randBytes(r, 0, 32),
		cipherSuite: uint16(r.Intn(math.MaxUint16)), compressionMethod: uint8(r.Intn(256))}
	if r.Intn(2) == 0 {
		m.serverNameAck = true
		m.extensionTypes = append(m.extensionTypes, extensionServerName)
	}
	if r.Intn(2) == 0 {
		m.alpnProtocol = randString(r, 10)
		m.extensionTypes = append(m.extensionTypes, extensionALPN)
	}
	if r.Intn(2) == 0 {
		m.ocspStapling = true
		m.extensionTypes = append(m.extensionTypes, extensionStatusRequest)
	}
	return reflect.ValueOf(m)
}

func (*certificateStatusMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(&certificateStatusMsg{response: randBytes(r, 1, 2000)})
}

func (*certificateMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	m := &certificateMsg{}
	for i := 0; i < r.Intn(4); i++ {
		m.certificates = append(m.certificates, randBytes(r, 1, 300))
	}
	return reflect.ValueOf(m)
}

func (*serverKeyExchangeMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(&serverKeyExchangeMsg{key: randBytes(r, 1, 200)})
}

func (*certificateRequestMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	m := &certificateRequestMsg{certificateTypes: randBytes(r, 1, 4)}
	for i := 0; i < r.Intn(3); i++ {
		m.certificateAuthorities = append(m.certificateAuthorities, randBytes(r, 1, 100))
	}
	return reflect.ValueOf(m)
}

func (*serverHelloDoneMsg) Generate(*mrand.Rand, int) reflect.Value {
	return reflect.ValueOf(&serverHelloDoneMsg{})
}

func (*helloRequestMsg) Generate(*mrand.Rand, int) reflect.Value {
	return reflect.ValueOf(&helloRequestMsg{})
}

func (*clientKeyExchangeMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(&clientKeyExchangeMsg{key: randBytes(r, 1, 200)})
}

func (*certificateVerifyMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(&certificateVerifyMsg{signature: randBytes(r, 1, 80)})
}

func (*finishedMsg) Generate(r *mrand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(&finishedMsg{verifyData: randBytes(r, 12, 12)})
}

// seedMessages returns realistic wire messages of each type, made with the
// test PKI: the seeds of the fuzz targets.
func seedMessages(t testing.TB) map[uint8][][]byte {
	p := getPKI(t)
	seeds := map[uint8][][]byte{}
	add := func(m handshakeMessage) {
		b, err := m.marshal()
		if err != nil {
			t.Fatal(err)
		}
		seeds[b[0]] = append(seeds[b[0]], b)
	}
	random := make([]byte, 32)
	rand.Read(random)
	add(&clientHelloMsg{vers: VersionTLCP, random: random, cipherSuites: DefaultCipherSuites, compressionMethods: []byte{0}})
	add(&clientHelloMsg{vers: VersionTLCP, random: random, sessionID: random, cipherSuites: []uint16{ECC_SM4_CBC_SM3, 0x00ff},
		compressionMethods: []byte{0}, serverName: "server.test", alpnProtocols: []string{"h2", "http/1.1"}})
	add(&serverHelloMsg{vers: VersionTLCP, random: random, sessionID: random, cipherSuite: ECC_SM4_GCM_SM3})
	add(&serverHelloMsg{vers: VersionTLCP, random: random, cipherSuite: ECDHE_SM4_GCM_SM3, serverNameAck: true, alpnProtocol: "http/1.1"})
	add(&clientHelloMsg{vers: VersionTLCP, random: random, cipherSuites: DefaultCipherSuites, compressionMethods: []byte{0}, serverName: "server.test", ocspStapling: true})
	add(&serverHelloMsg{vers: VersionTLCP, random: random, cipherSuite: ECC_SM4_GCM_SM3, ocspStapling: true})
	add(&certificateStatusMsg{response: []byte{0x30, 0x03, 0x0a, 0x01, 0x00}})
	add(&certificateMsg{certificates: p.server.wireList(nil, true)})
	add(&certificateMsg{})
	sig, err := signMessage(p.server.SignKey, rand.Reader, []byte("params"))
	if err != nil {
		t.Fatal(err)
	}
	add(&serverKeyExchangeMsg{key: marshalServerKeyExchange(nil, nil, sig)})
	point := make([]byte, 65)
	point[0] = 4
	rand.Read(point[1:])
	add(&serverKeyExchangeMsg{key: marshalServerKeyExchange(nil, marshalECDHEParams(point), sig)})
	add(&certificateRequestMsg{certificateTypes: []byte{certTypeRSASign, certTypeECDSASign}, certificateAuthorities: [][]byte{p.ca.Cert.RawSubject}})
	add(&serverHelloDoneMsg{})
	add(&helloRequestMsg{})
	pub, _ := leafSM2Key(mustParse(t, p.server.EncCertificate[0]))
	ct, err := sm2.Encrypt(rand.Reader, pub, make([]byte, 48), sm2.ASN1EncrypterOpts)
	if err != nil {
		t.Fatal(err)
	}
	add(&clientKeyExchangeMsg{key: append([]byte{byte(len(ct) >> 8), byte(len(ct))}, ct...)})
	add(&clientKeyExchangeMsg{key: marshalECDHEParams(point)})
	add(&clientKeyExchangeMsg{key: append([]byte{0, 69}, marshalECDHEParams(point)...)})
	add(&certificateVerifyMsg{signature: sig})
	add(&finishedMsg{verifyData: random[:12]})
	return seeds
}

func mustParse(t testing.TB, der []byte) *smx509.Certificate {
	c, err := parseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fuzzMessage is the body of every message fuzz target: parsing never
// panics, and what parses re-marshals to something that parses the same.
func fuzzMessage(f *testing.F, typ uint8, extra func(t *testing.T, m handshakeMessage)) {
	for _, s := range seedMessages(f)[typ] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newHandshakeMessage(typ)
		if !m.unmarshal(data) {
			return
		}
		if extra != nil {
			extra(t, m)
		}
		clearRaw(m)
		out, err := m.marshal()
		if err != nil {
			return // some parsed values cannot be re-encoded (e.g. empty lists)
		}
		m2 := newHandshakeMessage(typ)
		if !m2.unmarshal(out) {
			t.Fatalf("re-marshaled message does not parse: %x", out)
		}
		clearRaw(m)
		clearRaw(m2)
		dropUnknownExtensions(m)
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-marshal changed the message:\n%#v\n%#v", m, m2)
		}
	})
}

// dropUnknownExtensions forgets extensions that are parsed over and not
// kept (unknown types, SNI without a host name), which marshal therefore
// does not write again, and puts the others in the order marshal writes
// them (server_name, then ALPN) whatever order they arrived in.
func dropUnknownExtensions(m handshakeMessage) {
	keep := func(types []uint16, sni, alpn, status bool) []uint16 {
		var out []uint16
		if sni && slices.Contains(types, extensionServerName) {
			out = append(out, extensionServerName)
		}
		if alpn && slices.Contains(types, extensionALPN) {
			out = append(out, extensionALPN)
		}
		if status && slices.Contains(types, extensionStatusRequest) {
			out = append(out, extensionStatusRequest)
		}
		return out
	}
	switch m := m.(type) {
	case *clientHelloMsg:
		m.extensionTypes = keep(m.extensionTypes, m.serverName != "", len(m.alpnProtocols) > 0, m.ocspStapling)
	case *serverHelloMsg:
		m.extensionTypes = keep(m.extensionTypes, m.serverNameAck, m.alpnProtocol != "", m.ocspStapling)
	}
}

func FuzzClientHello(f *testing.F) { fuzzMessage(f, typeClientHello, nil) }
func FuzzServerHello(f *testing.F) { fuzzMessage(f, typeServerHello, nil) }
func FuzzCertificate(f *testing.F) { fuzzMessage(f, typeCertificate, nil) }

func FuzzServerKeyExchange(f *testing.F) {
	fuzzMessage(f, typeServerKeyExchange, func(t *testing.T, m handshakeMessage) {
		key := m.(*serverKeyExchangeMsg).key
		parseServerKeyExchange(key, false)
		parseServerKeyExchange(key, true)
	})
}

func FuzzCertificateRequest(f *testing.F) { fuzzMessage(f, typeCertificateRequest, nil) }
func FuzzServerHelloDone(f *testing.F)    { fuzzMessage(f, typeServerHelloDone, nil) }
func FuzzHelloRequest(f *testing.F)       { fuzzMessage(f, typeHelloRequest, nil) }

func FuzzClientKeyExchange(f *testing.F) {
	fuzzMessage(f, typeClientKeyExchange, func(t *testing.T, m handshakeMessage) {
		key := m.(*clientKeyExchangeMsg).key
		parseECCClientKeyExchange(key)
		if point, ok := parseECDHEClientKeyExchange(key); ok && len(point) == 0 {
			t.Fatal("empty point accepted")
		}
	})
}

func FuzzCertificateVerify(f *testing.F) { fuzzMessage(f, typeCertificateVerify, nil) }
func FuzzFinished(f *testing.F)          { fuzzMessage(f, typeFinished, nil) }
func FuzzCertificateStatus(f *testing.F) { fuzzMessage(f, typeCertificateStatus, nil) }

func FuzzSessionState(f *testing.F) {
	for _, s := range []*SessionState{
		{Version: VersionTLCP, CipherSuite: ECC_SM4_GCM_SM3, MasterSecret: make([]byte, 48), PeerCertificates: [][]byte{{1}, {2, 3}}, verified: true, ServerName: "a.test"},
		{Version: VersionTLCP, CipherSuite: ECDHE_SM4_GCM_SM3, MasterSecret: make([]byte, 48), binding: [sessionBindingSize]byte{1, 2, 3}},
		{Version: VersionTLCP, CipherSuite: ECDHE_SM4_GCM_SM3, MasterSecret: make([]byte, 48), PeerCertificates: [][]byte{{1}, {2}, {3}}, verified: true,
			chains: []sessionChain{{{peer: 0}, {peer: 2}, {peer: -1, sum: caDigest{9}}}, {{peer: 0}, {peer: -1, sum: caDigest{8}}}}},
	} {
		b, err := s.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseSessionState(data)
		if err != nil {
			return
		}
		if !sessionCertsFit(st.PeerCertificates) || len(st.ServerName) > maxServerNameLen {
			t.Fatal("parsed a state over the session bounds")
		}
		b, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("re-marshaled state differs:\n%x\n%x", b, data)
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz from seedMessages when
// TLCP_WRITE_FUZZ_SEEDS is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("TLCP_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set TLCP_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	targets := map[uint8]string{
		typeClientHello: "FuzzClientHello", typeServerHello: "FuzzServerHello", typeCertificate: "FuzzCertificate",
		typeServerKeyExchange: "FuzzServerKeyExchange", typeCertificateRequest: "FuzzCertificateRequest",
		typeServerHelloDone: "FuzzServerHelloDone", typeHelloRequest: "FuzzHelloRequest",
		typeClientKeyExchange: "FuzzClientKeyExchange", typeCertificateVerify: "FuzzCertificateVerify", typeFinished: "FuzzFinished",
	}
	for typ, seeds := range seedMessages(t) {
		for i, s := range seeds {
			writeSeed(t, targets[typ], i, s)
		}
	}
	toServer, toClient := recordSeeds(t)
	for i, s := range toServer {
		writeSeed(t, "FuzzServerRecords", i, s)
	}
	for i, s := range toClient {
		writeSeed(t, "FuzzClientRecords", i, s)
	}
}

func writeSeed(t *testing.T, target string, i int, data []byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMarshalRejectsOversizedFields(t *testing.T) {
	for _, m := range []handshakeMessage{
		&clientHelloMsg{vers: VersionTLCP, random: make([]byte, 32), sessionID: make([]byte, 256), cipherSuites: []uint16{1}, compressionMethods: []byte{0}},
		&certificateVerifyMsg{signature: make([]byte, 1<<16)},
		&certificateRequestMsg{certificateTypes: make([]byte, 300)},
	} {
		if _, err := m.marshal(); err == nil {
			t.Errorf("%T with an oversized field marshaled", m)
		}
	}
}

// helloWithExtensions returns a TLCP ClientHello carrying exts, each a
// type and a body, in order.
func helloWithExtensions(t testing.TB, exts ...helloExtension) []byte {
	t.Helper()
	w := newMessage(typeClientHello, 100)
	w.u16(VersionTLCP)
	w.raw(make([]byte, 32))
	w.vec(1, nil)
	w.vec(2, []byte{byte(ECC_SM4_GCM_SM3 >> 8), byte(ECC_SM4_GCM_SM3 & 0xff)})
	w.vec(1, []byte{0})
	list := w.open(2)
	for _, e := range exts {
		w.u16(e.typ)
		w.vec(2, e.body)
	}
	w.close(list, 2)
	b, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type helloExtension struct {
	typ  uint16
	body []byte
}

// sniExtension is a server_name extension naming name.
func sniExtension(name string) helloExtension {
	w := &builder{}
	list := w.open(2)
	w.u8(0)
	w.vec(2, []byte(name))
	w.close(list, 2)
	return helloExtension{extensionServerName, w.b}
}

func TestClientHelloExtensionLimits(t *testing.T) {
	many := func(n int) []helloExtension {
		exts := make([]helloExtension, n)
		for i := range exts {
			exts[i] = helloExtension{typ: uint16(0x1000 + i)}
		}
		return exts
	}
	for _, tc := range []struct {
		name string
		exts []helloExtension
		ok   bool
	}{
		{"at the limit", many(maxHelloExtensions), true},
		{"one over the limit", many(maxHelloExtensions + 1), false},
		// What a 64 KiB hello can hold: refused, not parsed.
		{"16000 extensions", many(16000), false},
		{"duplicate first and last", append(many(10), helloExtension{typ: 0x1000}), false},
		{"duplicate of the highest type", []helloExtension{{typ: 0xffff}, {typ: 0xfffe}, {typ: 0xffff}}, false},
		{"types 0 and 64 (same word, other bit)", []helloExtension{{typ: 64}, {typ: 0x40 + 1}, {typ: 0x4000}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m clientHelloMsg
			if got := m.unmarshal(helloWithExtensions(t, tc.exts...)); got != tc.ok {
				t.Fatalf("unmarshal = %v, want %v", got, tc.ok)
			}
			if tc.ok && len(m.extensionTypes) != len(tc.exts) {
				t.Fatalf("%d extensions recorded, want %d", len(m.extensionTypes), len(tc.exts))
			}
		})
	}
	// The ServerHello has the same rules.
	var sh serverHelloMsg
	w := newMessage(typeServerHello, 100)
	w.u16(VersionTLCP)
	w.raw(make([]byte, 32))
	w.vec(1, nil)
	w.u16(ECC_SM4_GCM_SM3)
	w.u8(0)
	list := w.open(2)
	for i := 0; i <= maxHelloExtensions; i++ {
		w.u16(uint16(0x2000 + i))
		w.u16(0)
	}
	w.close(list, 2)
	b, _ := w.finish()
	if sh.unmarshal(b) {
		t.Fatal("ServerHello with too many extensions parsed")
	}
}

func TestClientHelloServerNames(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name255 := strings.Join([]string{label63, label63, label63, strings.Repeat("b", 63)}, ".")
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"server.test", true},
		{"a", true},
		{"xn--fiqs8s.example.cn", true},
		{"_acme.example.cn", true},
		{"10.0.0.1", true}, // dotted digits are a valid host name syntax
		{name255, true},
		{name255 + "c", false}, // 256 bytes
		{strings.Repeat("a", 60000), false},
		{strings.Repeat("a", 64) + ".test", false}, // label over 63
		{"server.test.", false},
		{".server.test", false},
		{"server..test", false},
		{"server test", false},
		{"server.test\x00", false},
		{"::1", false},
		{"[::1]", false},
		{"server.test:443", false},
		{"exa\xc3\xa9mple.cn", false},
	} {
		var m clientHelloMsg
		got := m.unmarshal(helloWithExtensions(t, sniExtension(tc.name)))
		if got != tc.ok {
			t.Errorf("server name %.40q (%d bytes): unmarshal = %v, want %v", tc.name, len(tc.name), got, tc.ok)
		}
		if got && m.serverName != tc.name {
			t.Errorf("server name %q parsed as %q", tc.name, m.serverName)
		}
	}
}

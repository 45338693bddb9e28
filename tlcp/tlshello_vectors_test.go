package tlcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ClientHellos of GM-capable TLS clients, built field by field from
// what the sources say (testdata/gm-capable-hellos/README.md names the
// source of each field) and kept byte for byte as test vectors: the
// files hold the records as a client puts them on the wire.

var updateVectors = flag.Bool("update-gm-hellos", false, "rewrite testdata/gm-capable-hellos from the builders")

const gmHelloDir = "testdata/gm-capable-hellos"

// gmHelloVector is one vector: a file and how it is built.
type gmHelloVector struct {
	file string
	// gmCapable is whether the hello offers TLCP suites.
	gmCapable bool
	build     func() []byte
}

var gmHelloVectors = []gmHelloVector{
	{"360-chromium86-gm-last.hex", true, func() []byte {
		return chromium86Hello("360-chromium86-gm-last", chromiumSuites(false, true), nil)
	}},
	{"360-chromium86-gm-first.hex", true, func() []byte {
		return chromium86Hello("360-chromium86-gm-first", chromiumSuites(true, false), nil)
	}},
	{"chromium86-no-gm.hex", false, func() []byte {
		return chromium86Hello("chromium86-no-gm", chromiumSuites(false, false), nil)
	}},
	{"tls12-ecc-sm4-cbc-sm3.hex", true, func() []byte {
		return tls12Hello("tls12-ecc-sm4-cbc-sm3", nil)
	}},
}

// vectorBytes returns deterministic bytes for a vector's random fields.
func vectorBytes(name, field string, n int) []byte {
	sum := sha256.Sum256([]byte("gmgate vector " + name + " " + field))
	return sum[:n]
}

// GREASE values (RFC 8701) as a Chromium-based browser sends them; any
// of 0x?A?A does, these are fixed for the vectors.
const (
	greaseSuite  = 0x0a0a
	greaseExt1   = 0x2a2a
	greaseExt2   = 0x5a5a
	greaseGroup  = 0x7a7a
	greaseVers   = 0x9a9a
	chromiumName = "server.test"
)

// chromiumSuites is Chromium 86's cipher suite list, with the two TLCP
// suites 360 adds placed first or last (where is not documented).
func chromiumSuites(gmFirst, gmLast bool) []uint16 {
	tls := []uint16{0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035, 0x000a}
	gm := []uint16{ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3}
	out := []uint16{greaseSuite}
	if gmFirst {
		out = append(out, gm...)
	}
	out = append(out, tls...)
	if gmLast {
		out = append(out, gm...)
	}
	return out
}

// helloWriter writes a ClientHello with the package's builder.
func helloBody(vers uint16, random, sessionID []byte, suites []uint16, exts func(w *builder)) []byte {
	w := newMessage(typeClientHello, 512)
	w.u16(vers)
	w.raw(random)
	w.vec(1, sessionID)
	s := w.open(2)
	for _, id := range suites {
		w.u16(id)
	}
	w.close(s, 2)
	w.vec(1, []byte{0}) // null compression only
	e := w.open(2)
	exts(w)
	w.close(e, 2)
	b, err := w.finish()
	if err != nil {
		panic(err)
	}
	return b
}

func ext(w *builder, typ uint16, body func()) {
	w.u16(typ)
	pos := w.open(2)
	body()
	w.close(pos, 2)
}

func sniBody(w *builder, name string) {
	list := w.open(2)
	w.u8(0)
	w.vec(2, []byte(name))
	w.close(list, 2)
}

func u16List(w *builder, n int, vals ...uint16) {
	pos := w.open(n)
	for _, v := range vals {
		w.u16(v)
	}
	w.close(pos, n)
}

// chromium86Hello is the ClientHello of a Chromium 86 based browser (360
// Secure Browser 13 reports Chromium 86.0.4240.198) with the given
// suites: TLS 1.3 capable, so client_version 0x0303 with
// supported_versions, a 32-byte legacy session ID, GREASE, and padded to
// 512 bytes. sessionID, when not nil, replaces the random one.
func chromium86Hello(name string, suites []uint16, sessionID []byte) []byte {
	if sessionID == nil {
		sessionID = vectorBytes(name, "session_id", 32)
	}
	build := func(pad int) []byte {
		return helloBody(0x0303, vectorBytes(name, "random", 32), sessionID, suites, func(w *builder) {
			ext(w, greaseExt1, func() {})
			ext(w, extensionServerName, func() { sniBody(w, chromiumName) })
			ext(w, 23, func() {})                                  // extended_master_secret
			ext(w, extensionRenegotiationInfo, func() { w.u8(0) }) // initial handshake
			ext(w, 10, func() { u16List(w, 2, greaseGroup, 0x001d, 0x0017, 0x0018) })
			ext(w, 11, func() { w.vec(1, []byte{0}) }) // uncompressed points
			ext(w, 35, func() {})                      // session_ticket, none held
			ext(w, extensionALPN, func() { addALPNList(w, []string{"h2", "http/1.1"}) })
			ext(w, 5, func() { w.u8(1); w.u16(0); w.u16(0) }) // status_request: ocsp
			ext(w, 13, func() { u16List(w, 2, 0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601) })
			ext(w, 18, func() {}) // signed_certificate_timestamp
			ext(w, 51, func() {   // key_share: GREASE, then x25519
				shares := w.open(2)
				w.u16(greaseGroup)
				w.vec(2, []byte{0})
				w.u16(0x001d)
				w.vec(2, vectorBytes(name, "x25519", 32))
				w.close(shares, 2)
			})
			ext(w, 45, func() { w.vec(1, []byte{1}) }) // psk_dhe_ke
			ext(w, 43, func() {                        // supported_versions
				pos := w.open(1)
				w.u16(greaseVers)
				w.u16(0x0304)
				w.u16(0x0303)
				w.close(pos, 1)
			})
			ext(w, 27, func() { u16List(w, 1, 0x0002) }) // compress_certificate: brotli
			ext(w, greaseExt2, func() { w.u8(0) })
			if pad >= 0 {
				ext(w, 21, func() { w.raw(make([]byte, pad)) }) // padding
			}
		})
	}
	// BoringSSL pads a hello of 256 to 511 bytes to 512.
	if n := len(build(-1)); n >= 256 && n < 512-4 {
		return wrapRecords(0x0301, build(512-4-n))
	}
	return wrapRecords(0x0301, build(-1))
}

// tls12Hello is a TLS 1.2 ClientHello (record and client_version 0x0303)
// offering ECC_SM4_CBC_SM3 among ECDHE-RSA suites, with the TLS 1.2
// extensions every client sends: the hello the TASSL patch keys on.
func tls12Hello(name string, sessionID []byte) []byte {
	suites := []uint16{0xc02f, 0xc030, ECC_SM4_CBC_SM3, scsvRenegotiation}
	return wrapRecords(0x0303, helloBody(0x0303, vectorBytes(name, "random", 32), sessionID, suites, func(w *builder) {
		ext(w, extensionServerName, func() { sniBody(w, chromiumName) })
		ext(w, 10, func() { u16List(w, 2, 0x0017, 0x0018) })
		ext(w, 11, func() { w.vec(1, []byte{0}) })
		ext(w, 13, func() { u16List(w, 2, 0x0401, 0x0403, 0x0501, 0x0503) })
	}))
}

// wrapRecords puts a handshake message in handshake records of version
// vers, as one record unless it is too long.
func wrapRecords(vers uint16, msg []byte) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), maxPlaintext)
		out = append(out, byte(recordTypeHandshake), byte(vers>>8), byte(vers), byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// splitRecords returns the hello in records records of its version.
func splitRecords(wire []byte, records int) []byte {
	vers := uint16(wire[1])<<8 | uint16(wire[2])
	msg := wire[recordHeaderLen:]
	size := (len(msg) + records - 1) / records
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), size)
		out = append(out, wrapRecords(vers, msg[:n])...)
		msg = msg[n:]
	}
	return out
}

func encodeVector(wire []byte) []byte {
	var b strings.Builder
	for len(wire) > 0 {
		n := min(len(wire), 32)
		b.WriteString(hex.EncodeToString(wire[:n]))
		b.WriteByte('\n')
		wire = wire[n:]
	}
	return []byte(b.String())
}

// loadVector reads a vector file: hex, whitespace ignored, lines starting
// with # are comments.
func loadVector(t testing.TB, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(gmHelloDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var hexText strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		hexText.WriteString(strings.Join(strings.Fields(line), ""))
	}
	wire, err := hex.DecodeString(hexText.String())
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return wire
}

// TestGMCapableHelloVectors checks that the stored vectors are what the
// builders make, so that each byte is accounted for.
func TestGMCapableHelloVectors(t *testing.T) {
	for _, v := range gmHelloVectors {
		built := v.build()
		if *updateVectors {
			if err := os.WriteFile(filepath.Join(gmHelloDir, v.file), encodeVector(built), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := loadVector(t, v.file); !bytes.Equal(got, built) {
			t.Errorf("%s differs from its builder; run go test -run TestGMCapableHelloVectors -update-gm-hellos after checking why", v.file)
		}
	}
}

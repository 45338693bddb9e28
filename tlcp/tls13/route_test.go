package tls13

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
)

// firstRecord returns the handshake message in the first record a client
// writes.
func firstRecord(t *testing.T, start func(net.Conn)) []byte {
	t.Helper()
	c, s := net.Pipe()
	go start(c)
	defer c.Close()
	defer s.Close()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	return body
}

func TestRouting(t *testing.T) {
	ours := firstRecord(t, func(c net.Conn) { Client(c, clientConfig(t)).Handshake() })
	standard := firstRecord(t, func(c net.Conn) {
		tls.Client(c, &tls.Config{ServerName: "server.test", MinVersion: tls.VersionTLS13}).Handshake()
	})
	info, ok := ParseClientHello(ours)
	if !ok || !OffersShangMi(info) || !OffersOnlyShangMi(info) || info.ServerName != "server.test" {
		t.Fatalf("our hello: ok=%v %+v", ok, info)
	}
	info, ok = ParseClientHello(standard)
	if !ok || OffersShangMi(info) {
		t.Fatalf("crypto/tls hello taken for ours: ok=%v %+v", ok, info)
	}
	// A hello that offers both kinds of suites is ours, but not only ours.
	both := validHello()
	both.cipherSuites = []uint16{0x1301, TLS_SM4_GCM_SM3}
	info, ok = ParseClientHello(both.marshal())
	if !ok || !OffersShangMi(info) || OffersOnlyShangMi(info) {
		t.Fatalf("mixed hello: %+v", info)
	}
	for name, edit := range map[string]func(*clientHelloMsg){
		"no sm2sig_sm3": func(ch *clientHelloMsg) { ch.signatureAlgorithms = []uint16{0x0403} },
		"no TLS 1.3":    func(ch *clientHelloMsg) { ch.supportedVersions = []uint16{0x0303} },
		"no SM group":   func(ch *clientHelloMsg) { ch.supportedGroups = []CurveID{29} },
		"no SM suite":   func(ch *clientHelloMsg) { ch.cipherSuites = []uint16{0x1301} },
	} {
		ch := validHello()
		edit(ch)
		if info, ok := ParseClientHello(ch.marshal()); !ok || OffersShangMi(info) {
			t.Errorf("%s: routed here", name)
		}
	}
	if _, ok := ParseClientHello([]byte{1, 0, 0}); ok {
		t.Fatal("a truncated hello parsed")
	}
}

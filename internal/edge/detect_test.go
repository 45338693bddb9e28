package edge

import (
	"errors"
	"net"
	"testing"
)

func TestDetectProtocol(t *testing.T) {
	cases := []struct {
		hdr  []byte
		want WireProtocol
	}{
		{[]byte{22, 1, 1, 0, 80}, WireTLCP},
		{[]byte{22, 3, 1, 2, 0}, WireTLS},
		{[]byte{22, 3, 3, 0, 200}, WireTLS},
		{[]byte{22, 3, 0, 0, 50}, WireTLS},
		{[]byte{22, 1, 2, 0, 80}, 0},             // not a TLCP version
		{[]byte{23, 1, 1, 0, 80}, 0},             // application data first
		{[]byte{22, 3, 3, 0, 0}, 0},              // empty record
		{[]byte{0x80, 0x2e, 1, 3, 1}, 0},         // SSLv2-style hello
		{[]byte("GET / HTTP/1.1\r\n"), 0},        // plain HTTP
		{[]byte{22, 1}, 0},                       // short
		{[]byte("PROXY TCP4 1.2.3.4 "), 0},       // a PROXY header where none is trusted
		{[]byte{22, 3, 5, 0, 10}, 0},             // unknown TLS minor version
		{[]byte{22, 254, 253, 0, 10}, 0},         // DTLS
		{[]byte{22, 1, 1, 0x40, 0x00}, WireTLCP}, // largest allowed length
		{[]byte{22, 3, 3, 0x40, 0x00}, WireTLS},
	}
	for _, c := range cases {
		got, err := detectProtocol(c.hdr)
		if got != c.want || (c.want == 0) != (err != nil) {
			t.Errorf("detectProtocol(% x) = %v, %v; want %v", c.hdr, got, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrNotHandshake) {
			t.Errorf("error %v does not wrap errNotHandshake", err)
		}
	}
	// A plaintext record longer than 2^14 names its protocol, for the
	// record_overflow alert of its version.
	for hdr, want := range map[[5]byte]WireProtocol{
		{22, 1, 1, 0x40, 0x01}: WireTLCP,
		{22, 3, 1, 0x48, 0x00}: WireTLS,
		{22, 3, 3, 0xff, 0xff}: WireTLS,
	} {
		got, err := detectProtocol(hdr[:])
		if got != want || !errors.Is(err, errRecordOverflow) {
			t.Errorf("detectProtocol(% x) = %v, %v; want %v and errRecordOverflow", hdr, got, err, want)
		}
	}
}

func FuzzDetectProtocol(f *testing.F) {
	f.Add([]byte{22, 1, 1, 0, 80, 1, 0, 0, 76, 1, 1})
	f.Add([]byte{22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3})
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte{0x80, 0x2e, 1, 3, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		proto, err := detectProtocol(data)
		if (err == nil || errors.Is(err, errRecordOverflow)) != (proto == WireTLCP || proto == WireTLS) {
			t.Fatalf("detectProtocol(% x) = %v, %v", data, proto, err)
		}
		if err == nil && (len(data) < RecordHeaderLen || data[0] != 22) {
			t.Fatalf("accepted % x", data)
		}
	})
}

// TestReplayConnGivesHelloBack: the first flight is replayed whole, then
// the connection is read; the buffer it was read into goes back to
// helloBufs once replayed, not before.
func TestReplayConnGivesHelloBack(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	buf := HelloBufs.Get().(*[]byte)
	hello := append((*buf)[:0], "first flight"...)
	rc := &ReplayConn{Conn: a, Prefix: hello, HelloBuf: buf}
	got := make([]byte, 5)
	if n, err := rc.Read(got); err != nil || string(got[:n]) != "first" {
		t.Fatalf("read %q, %v", got[:n], err)
	}
	if rc.HelloBuf == nil {
		t.Fatal("the buffer was given back before the flight was replayed whole")
	}
	rest := make([]byte, 64)
	if n, err := rc.Read(rest); err != nil || string(rest[:n]) != " flight" {
		t.Fatalf("read %q, %v", rest[:n], err)
	}
	if rc.HelloBuf != nil || rc.Prefix != nil {
		t.Fatal("the replayed flight's buffer is kept")
	}
	go b.Write([]byte("next"))
	if n, err := rc.Read(rest); err != nil || string(rest[:n]) != "next" {
		t.Fatalf("after the flight, read %q, %v", rest[:n], err)
	}
}

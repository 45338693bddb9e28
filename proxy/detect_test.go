package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

func TestDetectProtocol(t *testing.T) {
	cases := []struct {
		hdr  []byte
		want wireProtocol
	}{
		{[]byte{22, 1, 1, 0, 80}, wireTLCP},
		{[]byte{22, 3, 1, 2, 0}, wireTLS},
		{[]byte{22, 3, 3, 0, 200}, wireTLS},
		{[]byte{22, 3, 0, 0, 50}, wireTLS},
		{[]byte{22, 1, 2, 0, 80}, 0},             // not a TLCP version
		{[]byte{23, 1, 1, 0, 80}, 0},             // application data first
		{[]byte{22, 3, 3, 0, 0}, 0},              // empty record
		{[]byte{22, 3, 3, 0xff, 0xff}, 0},        // oversized record
		{[]byte{0x80, 0x2e, 1, 3, 1}, 0},         // SSLv2-style hello
		{[]byte("GET / HTTP/1.1\r\n"), 0},        // plain HTTP
		{[]byte{22, 1}, 0},                       // short
		{[]byte("PROXY TCP4 1.2.3.4 "), 0},       // a PROXY header where none is trusted
		{[]byte{22, 3, 5, 0, 10}, 0},             // unknown TLS minor version
		{[]byte{22, 254, 253, 0, 10}, 0},         // DTLS
		{[]byte{22, 1, 1, 0x48, 0x00}, wireTLCP}, // largest allowed length
		{[]byte{22, 1, 1, 0x48, 0x01}, 0},
	}
	for _, c := range cases {
		got, err := detectProtocol(c.hdr)
		if got != c.want || (c.want == 0) != (err != nil) {
			t.Errorf("detectProtocol(% x) = %v, %v; want %v", c.hdr, got, err, c.want)
		}
		if err != nil && !errors.Is(err, errNotHandshake) {
			t.Errorf("error %v does not wrap errNotHandshake", err)
		}
	}
}

// peekProtocol must hand the same bytes on, whatever the read sizes.
func TestPeekReplays(t *testing.T) {
	hello := append([]byte{22, 1, 1, 0, 3}, "abc rest of the stream"...)
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		for _, chunk := range [][]byte{hello[:1], hello[1:4], hello[4:]} {
			_, _ = b.Write(chunk)
		}
		b.Close()
	}()
	proto, c, err := peekProtocol(a)
	if err != nil || proto != wireTLCP {
		t.Fatalf("peek = %v, %v", proto, err)
	}
	var got bytes.Buffer
	buf := make([]byte, 2)
	for {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), hello) {
		t.Fatalf("replayed %q, want %q", got.Bytes(), hello)
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
		if (err == nil) != (proto == wireTLCP || proto == wireTLS) {
			t.Fatalf("detectProtocol(% x) = %v, %v", data, proto, err)
		}
		if err == nil && (len(data) < recordHeaderLen || data[0] != 22) {
			t.Fatalf("accepted % x", data)
		}
		// Through a connection: the bytes that follow come out unchanged.
		a, b := net.Pipe()
		// What the server answers (a 400 to plain HTTP) is read too.
		go func() { _, _ = io.Copy(io.Discard, b) }()
		go func() {
			_, _ = b.Write(data)
			b.Close()
		}()
		defer a.Close()
		p2, c, err2 := peekProtocol(a)
		if p2 != proto || (err2 == nil) != (err == nil) {
			t.Fatalf("peekProtocol disagrees: %v %v vs %v %v", p2, err2, proto, err)
		}
		if err2 == nil {
			rest, _ := io.ReadAll(c)
			if !bytes.Equal(rest, data) {
				t.Fatalf("replayed %x, want %x", rest, data)
			}
		}
	})
}

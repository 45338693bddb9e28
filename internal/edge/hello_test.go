package edge

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/gmgate/gmgate/tlcp"
)

// records splits a handshake message into records of at most size bytes
// of the given version.
func records(version [2]byte, msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, RecordTypeHandshake, version[0], version[1], byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// handshakeMessage is a handshake message of the given type with a body
// of n bytes.
func handshakeMessage(typ byte, n int) []byte {
	m := []byte{typ, byte(n >> 16), byte(n >> 8), byte(n)}
	return append(m, bytes.Repeat([]byte{0xab}, n)...)
}

// A ClientHello comes out whole, however it is split into records and
// however the reads return it; what a read returned after it comes out
// too, and the rest stays unread.
func TestReadClientHello(t *testing.T) {
	for _, c := range []struct {
		name    string
		version [2]byte
		want    WireProtocol
		bodyLen int
		record  int
	}{
		{"tlcp in one record", [2]byte{1, 1}, WireTLCP, 120, 1 << 14},
		{"tls in one record", [2]byte{3, 1}, WireTLS, 512, 1 << 14},
		{"tlcp over several records", [2]byte{1, 1}, WireTLCP, 40000, 1 << 14},
		{"header split across records", [2]byte{3, 3}, WireTLS, 100, 3},
		{"largest allowed", [2]byte{1, 1}, WireTLCP, maxClientHello, 1 << 14},
	} {
		t.Run(c.name, func(t *testing.T) {
			hello := records(c.version, handshakeMessage(HandshakeTypeClientHello, c.bodyLen), c.record)
			next := []byte{20, c.version[0], c.version[1], 0, 1, 1}
			for _, r := range []io.Reader{bytes.NewReader(append(hello, next...)), iotest.OneByteReader(bytes.NewReader(append(hello, next...)))} {
				var alerts bytes.Buffer
				proto, raw, err := ReadClientHello(r, &alerts, nil)
				if err != nil || proto != c.want || !bytes.HasPrefix(raw, hello) || alerts.Len() != 0 {
					t.Fatalf("got %v, %d bytes, %v, alert % x; want %v and the %d bytes of the hello first", proto, len(raw), err, alerts.Bytes(), c.want, len(hello))
				}
				rest, _ := io.ReadAll(r)
				if after := append(raw[len(hello):], rest...); !bytes.Equal(after, next) {
					t.Fatalf("returned % x after the hello and left % x unread, want % x in all", raw[len(hello):], rest, next)
				}
			}
		})
	}
}

func TestReadClientHelloRefuses(t *testing.T) {
	tlcpV := [2]byte{1, 1}
	hello := handshakeMessage(HandshakeTypeClientHello, 100)
	for _, c := range []struct {
		name  string
		in    []byte
		err   error      // errors.Is
		alert tlcp.Alert // when an alert must be sent
	}{
		{"nothing", nil, io.EOF, 0},
		{"a partial header", []byte{22, 1}, io.ErrUnexpectedEOF, 0},
		{"a truncated hello", records(tlcpV, hello, 1<<14)[:50], io.ErrUnexpectedEOF, 0},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\n\r\n"), ErrPlainHTTP, 0},
		{"application data first", []byte{23, 1, 1, 0, 1, 0}, ErrNotHandshake, 0},
		{"a ServerHello", records(tlcpV, handshakeMessage(2, 70), 1<<14), nil, tlcp.AlertUnexpectedMessage},
		{"a hello too large", records(tlcpV, handshakeMessage(HandshakeTypeClientHello, maxClientHello+1), 1<<14), nil, tlcp.AlertIllegalParameter},
		{"too many records", records(tlcpV, hello, 1), nil, tlcp.AlertUnexpectedMessage},
		{"an alert inside the hello", append(records(tlcpV, hello, 60)[:65], 21, 1, 1, 0, 2, 2, 40), nil, tlcp.AlertUnexpectedMessage},
		{"a TLS record inside a TLCP hello", append(records(tlcpV, hello, 60)[:65], 22, 3, 3, 0, 44), nil, tlcp.AlertUnexpectedMessage},
		// Refused on its header, before its body is read.
		{"a first record longer than 2^14", records(tlcpV, handshakeMessage(HandshakeTypeClientHello, 1<<15), 1<<14+1)[:RecordHeaderLen], errRecordOverflow, tlcp.AlertRecordOverflow},
		{"a later record longer than 2^14", append(records(tlcpV, handshakeMessage(HandshakeTypeClientHello, 1<<15), 1<<14)[:RecordHeaderLen+1<<14], 22, 1, 1, 0x40, 0x01), errRecordOverflow, tlcp.AlertRecordOverflow},
	} {
		t.Run(c.name, func(t *testing.T) {
			var alerts bytes.Buffer
			_, raw, err := ReadClientHello(bytes.NewReader(c.in), &alerts, nil)
			if err == nil || raw != nil {
				t.Fatalf("accepted: %d bytes", len(raw))
			}
			if c.err != nil && !errors.Is(err, c.err) {
				t.Errorf("err = %v, want %v", err, c.err)
			}
			var ae *tlcp.AlertError
			switch {
			case errors.Is(err, ErrPlainHTTP):
				if alerts.String() != plainHTTPAnswer {
					t.Errorf("answered %q to plain HTTP", alerts.String())
				}
			case c.alert == 0 && alerts.Len() != 0:
				t.Errorf("sent % x, want no alert", alerts.Bytes())
			case c.alert != 0 && (!errors.As(err, &ae) || ae.Alert != c.alert || !bytes.Equal(alerts.Bytes(), []byte{21, 1, 1, 0, 2, 2, byte(c.alert)})):
				t.Errorf("err %v, sent % x; want alert %v", err, alerts.Bytes(), c.alert)
			}
		})
	}
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(records([2]byte{1, 1}, handshakeMessage(HandshakeTypeClientHello, 60), 1<<14))
	f.Add(records([2]byte{3, 3}, handshakeMessage(HandshakeTypeClientHello, 60), 7))
	f.Add(records([2]byte{1, 1}, handshakeMessage(11, 60), 1<<14))
	f.Add([]byte{22, 1, 1, 0, 4, 1, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var alerts bytes.Buffer
		proto, raw, err := ReadClientHello(bytes.NewReader(data), &alerts, nil)
		if err != nil {
			if raw != nil {
				t.Fatalf("bytes returned with error %v", err)
			}
			if alerts.Len() != 0 && alerts.Len() != 7 && alerts.String() != plainHTTPAnswer {
				t.Fatalf("answered % x", alerts.Bytes())
			}
			return
		}
		if proto != WireTLCP && proto != WireTLS {
			t.Fatalf("protocol %v", proto)
		}
		// What was read is what came first, and it starts with whole
		// handshake records that hold a whole ClientHello.
		if !bytes.HasPrefix(data, raw) {
			t.Fatalf("returned bytes that were not read first")
		}
		var msg []byte
		for rest := raw; len(msg) < 4 || len(msg) < 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])); {
			if len(rest) < RecordHeaderLen || rest[0] != RecordTypeHandshake {
				t.Fatalf("not a handshake record: % x", rest[:min(len(rest), 5)])
			}
			n := RecordHeaderLen + (int(rest[3])<<8 | int(rest[4]))
			if n > len(rest) {
				t.Fatalf("a partial record")
			}
			msg = append(msg, rest[RecordHeaderLen:n]...)
			rest = rest[n:]
		}
		if msg[0] != HandshakeTypeClientHello {
			t.Fatalf("returned a handshake message of type %d", msg[0])
		}
	})
}

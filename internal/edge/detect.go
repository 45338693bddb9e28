package edge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
)

// Wire protocols a client can speak on an auto listener.
type WireProtocol int

const (
	WireTLCP WireProtocol = iota + 1
	WireTLS
)

func (p WireProtocol) String() string {
	switch p {
	case WireTLCP:
		return "tlcp"
	case WireTLS:
		return "tls"
	}
	return "unknown"
}

// recordHeaderLen is the length of a TLS/TLCP record header: type (1),
// version (2), length (2).
const RecordHeaderLen = 5

var ErrNotHandshake = errors.New("the first bytes are not a TLCP or TLS handshake record")

// maxPlaintextRecord is the longest plaintext record (RFC 5246 §6.2.1,
// RFC 8446 §5.1, GB/T 38636 §6.3.3.1): the records of a ClientHello are
// plaintext, so the 2^14+2048 bytes of a TLS 1.2 ciphertext (or 2^14+256
// in TLS 1.3) do not apply to them. crypto/tls checks only those bounds
// before a handshake, but no conforming client sends a longer plaintext
// record, and one that does only pins a buffer until the hello times out.
const maxPlaintextRecord = 1 << 14

// errRecordOverflow is a handshake record longer than maxPlaintextRecord:
// refused at once with record_overflow, not read to its end.
var errRecordOverflow = errors.New("a handshake record is longer than 2^14 bytes")

// errPlainHTTP is a plain HTTP request on a TLCP/TLS port; it was answered
// with a 400 that says so, as nginx does.
var ErrPlainHTTP = errors.New("plain HTTP request on a TLCP/TLS port")

// plainHTTPAnswer is the answer to a plain HTTP request on a TLCP/TLS
// port: a browser shows the reason instead of a reset connection.
var plainHTTPAnswer = "HTTP/1.1 400 Bad Request\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(plainHTTPBody)) + "\r\n\r\n" +
	plainHTTPBody

const plainHTTPBody = "400 Bad Request: a plain HTTP request was sent to a TLCP/TLS (HTTPS) port.\n"

// looksLikeHTTP reports whether the first bytes of a connection start an
// HTTP/1 request line: an upper-case method and a space ("GET /").
func looksLikeHTTP(hdr []byte) bool {
	if string(hdr) == "PROXY" {
		return false // a PROXY header this listener does not expect
	}
	for i, c := range hdr {
		switch {
		case c >= 'A' && c <= 'Z':
		case c == ' ' && i >= 3:
			return true
		default:
			return false
		}
	}
	return len(hdr) == RecordHeaderLen
}

// detectProtocol tells TLCP from TLS by the header of the first record: a
// handshake record (type 22) with version 1.1 (01 01) is TLCP, one with
// major version 3 is TLS. Everything else, including SSLv2-style hellos
// (which no current client sends), is refused with errNotHandshake. A
// handshake record of either protocol longer than maxPlaintextRecord
// returns its protocol and errRecordOverflow, for the caller to answer
// with the alert.
func detectProtocol(hdr []byte) (WireProtocol, error) {
	if len(hdr) < RecordHeaderLen {
		return 0, ErrNotHandshake
	}
	if hdr[0] != 22 {
		return 0, fmt.Errorf("%w (record type %d)", ErrNotHandshake, hdr[0])
	}
	var proto WireProtocol
	switch {
	case hdr[1] == 1 && hdr[2] == 1:
		proto = WireTLCP
	case hdr[1] == 3 && hdr[2] <= 4:
		proto = WireTLS
	default:
		return 0, fmt.Errorf("%w (version %02x %02x)", ErrNotHandshake, hdr[1], hdr[2])
	}
	switch length := int(hdr[3])<<8 | int(hdr[4]); {
	case length == 0:
		return 0, fmt.Errorf("%w (empty record)", ErrNotHandshake)
	case length > maxPlaintextRecord:
		return proto, fmt.Errorf("%w (%d bytes)", errRecordOverflow, length)
	}
	return proto, nil
}

// DetectProtocol is detectProtocol for listeners outside this package
// (the admin listener), which tell TLCP from TLS the same way.
func DetectProtocol(hdr []byte) (WireProtocol, error) { return detectProtocol(hdr) }

// answerPlainHTTP writes the 400 and lets the client read it: the rest of
// its request is drained (within the deadline already set on the
// connection) so that closing does not reset the connection under the
// answer.
func answerPlainHTTP(r io.Reader, w io.Writer) {
	if _, err := io.WriteString(w, plainHTTPAnswer); err != nil {
		return
	}
	if cw, ok := w.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
}

// replayConn returns prefix before reading from the connection again.
type ReplayConn struct {
	net.Conn
	Prefix []byte
	// helloBuf, when set, is the helloBufs buffer prefix was read into,
	// given back once prefix has been read.
	HelloBuf *[]byte
	// refusedName is the server name of a TLS ClientHello that no site
	// serves, which crypto/tls does not report (see siteTable.outerTLS).
	RefusedName string
}

func (c *ReplayConn) Read(b []byte) (int, error) {
	if len(c.Prefix) > 0 {
		n := copy(b, c.Prefix)
		c.Prefix = c.Prefix[n:]
		if len(c.Prefix) == 0 {
			// Let the buffer go: the connection may live for hours.
			c.Prefix = nil
			if c.HelloBuf != nil {
				HelloBufs.Put(c.HelloBuf)
				c.HelloBuf = nil
			}
		}
		return n, nil
	}
	return c.Conn.Read(b)
}

// CloseWrite half-closes when the connection underneath can.
func (c *ReplayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

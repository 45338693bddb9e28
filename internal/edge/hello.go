package edge

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/gmgate/gmgate/tlcp"
)

// Limits of the first flight, before any handshake slot is taken. They are
// those package tlcp and crypto/tls apply to any handshake message, so a
// ClientHello either of them would take is never refused here.
const (
	// maxClientHello bounds the first handshake message.
	maxClientHello = 1 << 16
	// maxHelloRecords bounds the records it may be split into.
	maxHelloRecords = 64
	// helloReadChunk is how much is read at a time: the buffer grows with
	// what the client has sent, not with what a record header promises.
	helloReadChunk = 2048
)

const (
	HandshakeTypeClientHello = 1
	RecordTypeAlert          = 21
	RecordTypeHandshake      = 22
)

// readClientHello reads the records that carry a client's first handshake
// message, which must be a ClientHello, and returns the protocol the first
// record header names with the bytes read, for the handshake to replay.
// Reads take what the client has sent, up to helloReadChunk at a time, so
// that a hello sent at once (the usual case) costs one system call; the
// bytes returned may go on past the hello's last record, and the handshake
// reads them next.
//
// It is the part of a handshake a client controls alone, so that it can
// run before a handshake slot is taken: a client that sends its hello
// slowly, or never, holds a goroutine and a connection (bounded by
// max_connections and the caller's deadline) but no slot. Records that are
// not handshake records fail with errNotHandshake and no alert (a plain
// HTTP request gets a 400 written to w and errPlainHTTP); a handshake
// message that is not a ClientHello, or too large, fails with the alert a
// TLCP or TLS server sends for it, and the alert is written to w.
//
// The bytes are read into buf's capacity, and past it into a larger
// buffer when they do not fit; nil buf reads into a new one.
func ReadClientHello(r io.Reader, w io.Writer, buf []byte) (WireProtocol, []byte, error) {
	if cap(buf) < helloReadChunk {
		buf = make([]byte, 0, helloReadChunk)
	}
	h := helloReader{r: r, buf: buf[:0]}
	if err := h.fill(RecordHeaderLen); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) && len(h.buf) == 0 {
			err = io.EOF
		}
		return 0, nil, err
	}
	hdr := [RecordHeaderLen]byte(h.buf)
	proto, err := detectProtocol(hdr[:])
	if errors.Is(err, errRecordOverflow) {
		return proto, nil, sendAlert(w, [2]byte{hdr[1], hdr[2]}, tlcp.AlertRecordOverflow, err)
	}
	if err != nil {
		if looksLikeHTTP(hdr[:]) {
			answerPlainHTTP(r, w)
			return 0, nil, ErrPlainHTTP
		}
		return 0, nil, err
	}
	version := [2]byte{hdr[1], hdr[2]}
	var msgHeader [4]byte
	got := 0   // handshake bytes read
	want := -1 // whole message length, once its header is in
	end := 0   // where the records read so far end
	for records := 1; ; records++ {
		body := end + RecordHeaderLen
		end = body + recordLength(hdr)
		if err := h.fill(end); err != nil {
			return proto, nil, err
		}
		for _, b := range h.buf[body:end] {
			if got < len(msgHeader) {
				msgHeader[got] = b
			}
			got++
		}
		if want < 0 && got >= len(msgHeader) {
			if msgHeader[0] != HandshakeTypeClientHello {
				return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, fmt.Errorf("the first handshake message has type %d, not ClientHello", msgHeader[0]))
			}
			n := int(msgHeader[1])<<16 | int(msgHeader[2])<<8 | int(msgHeader[3])
			if n > maxClientHello {
				return proto, nil, sendAlert(w, version, tlcp.AlertIllegalParameter, fmt.Errorf("ClientHello of %d bytes exceeds the limit of %d", n, maxClientHello))
			}
			want = len(msgHeader) + n
		}
		if want >= 0 && got >= want {
			return proto, h.buf, nil
		}
		if records == maxHelloRecords {
			return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, fmt.Errorf("ClientHello split into more than %d records", maxHelloRecords))
		}
		if err := h.fill(end + RecordHeaderLen); err != nil {
			return proto, nil, err
		}
		hdr = [RecordHeaderLen]byte(h.buf[end:])
		next, err := detectProtocol(hdr[:])
		if errors.Is(err, errRecordOverflow) && next == proto {
			return proto, nil, sendAlert(w, version, tlcp.AlertRecordOverflow, err)
		}
		if err != nil || next != proto {
			return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, errors.New("a record that is not part of the ClientHello came before its end"))
		}
	}
}

// helloBufs hold first flights: a connection takes one to read its
// ClientHello into, and the replayConn that replays it gives it back once
// the handshake has read it all (replayConn.Read), so that a connection
// does not allocate one.
var HelloBufs = sync.Pool{New: func() any { b := make([]byte, 0, helloReadChunk); return &b }}

// helloReader reads the first flight into buf.
type helloReader struct {
	r   io.Reader
	buf []byte
}

// fill reads until buf holds n bytes, with whatever more a read returns:
// buf grows by helloReadChunk at most at a time, with what the client
// sent, not with what a record header promises. The end of the stream
// before n bytes is io.ErrUnexpectedEOF.
func (h *helloReader) fill(n int) error {
	for len(h.buf) < n {
		if len(h.buf) == cap(h.buf) {
			h.buf = slices.Grow(h.buf, min(n-len(h.buf), helloReadChunk))
		}
		m, err := h.r.Read(h.buf[len(h.buf):cap(h.buf)])
		h.buf = h.buf[:len(h.buf)+m]
		if len(h.buf) >= n {
			return nil
		}
		if err != nil {
			return truncated(err)
		}
	}
	return nil
}

func recordLength(hdr [RecordHeaderLen]byte) int { return int(hdr[3])<<8 | int(hdr[4]) }

// truncated turns the end of the stream inside a ClientHello into
// io.ErrUnexpectedEOF (io.EOF is for a client that sent nothing).
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// sendAlert writes a fatal alert record of the client's version and
// returns it as the handshake's error.
func sendAlert(w io.Writer, version [2]byte, a tlcp.Alert, cause error) error {
	const fatal = 2
	if w != nil {
		_, _ = w.Write([]byte{RecordTypeAlert, version[0], version[1], 0, 2, fatal, byte(a)})
	}
	return &tlcp.AlertError{Alert: a, Err: cause}
}

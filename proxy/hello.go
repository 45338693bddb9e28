package proxy

import (
	"errors"
	"fmt"
	"io"
	"slices"

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
	handshakeTypeClientHello = 1
	recordTypeAlert          = 21
	recordTypeHandshake      = 22
)

// readClientHello reads the records that carry a client's first handshake
// message, which must be a ClientHello, and returns the protocol the first
// record header names with the bytes read, for the handshake to replay.
//
// It is the part of a handshake a client controls alone, so that it can
// run before a handshake slot is taken: a client that sends its hello
// slowly, or never, holds a goroutine and a connection (bounded by
// max_connections and the caller's deadline) but no slot. Records that are
// not handshake records fail with errNotHandshake and no alert (a plain
// HTTP request gets a 400 written to w and errPlainHTTP); a handshake
// message that is not a ClientHello, or too large, fails with the alert a
// TLCP or TLS server sends for it, and the alert is written to w.
func readClientHello(r io.Reader, w io.Writer) (wireProtocol, []byte, error) {
	var hdr [recordHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	proto, err := detectProtocol(hdr[:])
	if err != nil {
		if looksLikeHTTP(hdr[:]) {
			answerPlainHTTP(r, w)
			return 0, nil, errPlainHTTP
		}
		return 0, nil, err
	}
	version := [2]byte{hdr[1], hdr[2]}
	raw := make([]byte, 0, recordHeaderLen+min(recordLength(hdr), helloReadChunk))
	var msgHeader [4]byte
	got := 0   // handshake bytes read
	want := -1 // whole message length, once its header is in
	for records := 1; ; records++ {
		raw = append(raw, hdr[:]...)
		for left := recordLength(hdr); left > 0; {
			start := len(raw)
			n := min(left, helloReadChunk)
			raw = slices.Grow(raw, n)[:start+n]
			if _, err := io.ReadFull(r, raw[start:]); err != nil {
				return proto, nil, truncated(err)
			}
			for _, b := range raw[start:] {
				if got < len(msgHeader) {
					msgHeader[got] = b
				}
				got++
			}
			left -= n
		}
		if want < 0 && got >= len(msgHeader) {
			if msgHeader[0] != handshakeTypeClientHello {
				return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, fmt.Errorf("the first handshake message has type %d, not ClientHello", msgHeader[0]))
			}
			n := int(msgHeader[1])<<16 | int(msgHeader[2])<<8 | int(msgHeader[3])
			if n > maxClientHello {
				return proto, nil, sendAlert(w, version, tlcp.AlertIllegalParameter, fmt.Errorf("ClientHello of %d bytes exceeds the limit of %d", n, maxClientHello))
			}
			want = len(msgHeader) + n
		}
		if want >= 0 && got >= want {
			return proto, raw, nil
		}
		if records == maxHelloRecords {
			return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, fmt.Errorf("ClientHello split into more than %d records", maxHelloRecords))
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return proto, nil, truncated(err)
		}
		if next, err := detectProtocol(hdr[:]); err != nil || next != proto {
			return proto, nil, sendAlert(w, version, tlcp.AlertUnexpectedMessage, errors.New("a record that is not part of the ClientHello came before its end"))
		}
	}
}

func recordLength(hdr [recordHeaderLen]byte) int { return int(hdr[3])<<8 | int(hdr[4]) }

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
		_, _ = w.Write([]byte{recordTypeAlert, version[0], version[1], 0, 2, fatal, byte(a)})
	}
	return &tlcp.AlertError{Alert: a, Err: cause}
}

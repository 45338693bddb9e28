package tls13

// The connection: the TLS 1.3 record layer (inner content types,
// padding, KeyUpdate, pooled buffers) and the Conn API. One file, longer
// than most, for the reason tlcp's conn.go is: the read and write paths
// share the connection's state and locks.

import (
	"bytes"
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Conn is a TLS 1.3 ShangMi connection over a net.Conn. Read and Write may
// be called concurrently with each other; the first error of each
// direction sticks.
type Conn struct {
	conn        net.Conn
	isClient    bool
	config      *Config
	handshakeFn func(context.Context) error

	handshakeMutex      sync.Mutex
	handshakeErr        error
	isHandshakeComplete atomic.Bool

	// Negotiated state, written by the handshake under handshakeMutex.
	cipherSuite        uint16
	group              CurveID
	didResume          bool
	didHRR             bool
	serverName         string
	negotiatedProtocol string
	peerCertificates   []*smx509.Certificate
	verifiedChains     [][]*smx509.Certificate

	// resumptionSecret is the resumption master secret, for the tickets a
	// client receives after the handshake.
	resumptionSecret []byte
	// ticketKey is the client cache key its tickets are stored under.
	ticketKey    string
	ticketsRead  int
	keyUpdates   int // KeyUpdates read since the last application data
	emptyRecords int

	in, out halfConn

	// Raw input: rawBuf[rawR:rawW] is read but not yet a whole record.
	// rawBuf comes from inputBufs and goes back once Read has consumed
	// it, so that an idle connection holds no input buffer.
	rawBuf     *[]byte
	rawR, rawW int
	input      []byte       // application data not yet returned by Read
	hand       bytes.Buffer // handshake bytes not yet parsed

	// buffering collects a flight in sendBuf so that it leaves in one
	// write. sendBuf comes from outputBufs and goes back after each
	// flush outside a flight.
	buffering bool
	sendBuf   []byte
	sendPtr   *[]byte

	closeNotifySent bool
	closeNotifyErr  error
	// activeCall counts Writes in flight (in steps of 2); its lowest bit
	// is set once Close has begun.
	activeCall atomic.Int32
	// peerFatal is set once the peer sent a fatal alert: nothing more is
	// written then.
	peerFatal atomic.Bool
}

// halfConn is the record protection of one direction.
type halfConn struct {
	sync.Mutex
	err    error
	aead   cipher.AEAD // nil: records are plaintext
	iv     [ivLen]byte
	seq    uint64
	secret []byte
	suite  *cipherSuite
}

func (hc *halfConn) setErrorLocked(err error) error {
	if e, ok := err.(net.Error); ok {
		hc.err = &permanentError{err: e}
	} else {
		hc.err = err
	}
	return err
}

// setTrafficSecret switches the direction to keys derived from secret.
func (hc *halfConn) setTrafficSecret(suite *cipherSuite, secret []byte) error {
	key, iv := trafficKey(secret)
	aead, err := suite.aead(key)
	if err != nil {
		return err
	}
	hc.aead = aead
	hc.suite = suite
	hc.secret = secret
	copy(hc.iv[:], iv)
	hc.seq = 0
	return nil
}

// nonce is the per-record nonce: the IV XOR the padded sequence number
// (RFC 8446 §5.3).
func (hc *halfConn) nonce() [ivLen]byte {
	n := hc.iv
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], hc.seq)
	for i := range seq {
		n[ivLen-8+i] ^= seq[i]
	}
	return n
}

func (hc *halfConn) incSeq() error {
	hc.seq++
	if hc.seq == 0 {
		return errors.New("sequence number wrapped")
	}
	return nil
}

type permanentError struct{ err net.Error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Timeout() bool   { return e.err.Timeout() }
func (e *permanentError) Temporary() bool { return false }

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetDeadline sets the read and write deadlines of the underlying
// connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline of the underlying connection.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.conn }

// Buffers: inputBufs hold one whole record and what follows it in the
// same read; outputBufs collect sealed records up to flushSize.
var (
	inputBufs  = sync.Pool{New: func() any { b := make([]byte, 2*(recordHeaderLen+maxCiphertext)); return &b }}
	outputBufs = sync.Pool{New: func() any { b := make([]byte, 0, flushSize+recordHeaderLen+maxCiphertext); return &b }}
)

// flushSize is how much sealed data a Write collects before writing.
const flushSize = 64 << 10

// readFull makes sure rawBuf holds at least n unread bytes (n is at most
// a whole record), reading what the connection has.
func (c *Conn) readFull(n int) error {
	if c.rawBuf == nil {
		c.rawBuf = inputBufs.Get().(*[]byte)
		c.rawR, c.rawW = 0, 0
	}
	buf := *c.rawBuf
	if c.rawR+n > len(buf) {
		copy(buf, buf[c.rawR:c.rawW])
		c.rawW -= c.rawR
		c.rawR = 0
	}
	for c.rawW-c.rawR < n {
		m, err := c.conn.Read(buf[c.rawW:])
		c.rawW += m
		if c.rawW-c.rawR >= n {
			break
		}
		if err != nil {
			if err == io.EOF && c.rawW > c.rawR {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// releaseInput gives the input buffer back when nothing in it is unread.
func (c *Conn) releaseInput() {
	if c.rawBuf != nil && c.rawR == c.rawW && len(c.input) == 0 {
		inputBufs.Put(c.rawBuf)
		c.rawBuf = nil
		c.input = nil
	}
}

// readRecord reads one record and files its content: handshake bytes into
// c.hand, application data into c.input; alerts end the connection. The
// caller holds c.in.
func (c *Conn) readRecord() error {
	if c.in.err != nil {
		return c.in.err
	}
	if err := c.readFull(recordHeaderLen); err != nil {
		if e, ok := err.(net.Error); !ok || !e.Timeout() {
			c.in.setErrorLocked(err)
		}
		return err
	}
	hdr := (*c.rawBuf)[c.rawR : c.rawR+recordHeaderLen]
	typ := recordType(hdr[0])
	vers := binary.BigEndian.Uint16(hdr[1:])
	n := int(binary.BigEndian.Uint16(hdr[3:]))
	if vers>>8 != 3 {
		return c.in.setErrorLocked(c.sendAlert(AlertProtocolVersion, fmt.Errorf("record version %#04x", vers)))
	}
	limit := maxPlaintext
	if c.in.aead != nil {
		limit = maxCiphertext
	}
	if n > limit {
		return c.in.setErrorLocked(c.sendAlert(AlertRecordOverflow, fmt.Errorf("record of %d bytes", n)))
	}
	if err := c.readFull(recordHeaderLen + n); err != nil {
		if e, ok := err.(net.Error); !ok || !e.Timeout() {
			c.in.setErrorLocked(err)
		}
		return err
	}
	record := (*c.rawBuf)[c.rawR : c.rawR+recordHeaderLen+n]
	c.rawR += recordHeaderLen + n
	payload := record[recordHeaderLen:]

	// A change_cipher_spec of one byte 1 may come during the handshake
	// (middlebox compatibility, RFC 8446 §5): it is dropped unprotected.
	if typ == recordTypeChangeCipherSpec {
		if c.isHandshakeComplete.Load() || n != 1 || payload[0] != 1 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("change_cipher_spec outside the handshake")))
		}
		return c.countEmpty()
	}
	if c.in.aead != nil && typ == recordTypeAlert && n == 2 && !c.isHandshakeComplete.Load() {
		// A peer that fails before it has handshake keys of its own
		// writes its alert in the clear: report it rather than an
		// unexpected record.
	} else if c.in.aead != nil {
		if typ != recordTypeApplicationData {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("unprotected record of type %d", typ)))
		}
		if n < tagLen+1 {
			return c.in.setErrorLocked(c.sendAlert(AlertBadRecordMAC, errors.New("record shorter than its tag")))
		}
		nonce := c.in.nonce()
		plain, err := c.in.aead.Open(payload[:0], nonce[:], payload, record[:recordHeaderLen])
		if err != nil {
			return c.in.setErrorLocked(c.sendAlert(AlertBadRecordMAC, errors.New("record failed authentication")))
		}
		if err := c.in.incSeq(); err != nil {
			return c.in.setErrorLocked(c.sendAlert(AlertInternalError, err))
		}
		// Strip the padding: the content type is the last non-zero byte.
		i := len(plain) - 1
		for i >= 0 && plain[i] == 0 {
			i--
		}
		if i < 0 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("record without a content type")))
		}
		typ = recordType(plain[i])
		payload = plain[:i]
		if len(payload) > maxPlaintext {
			return c.in.setErrorLocked(c.sendAlert(AlertRecordOverflow, errors.New("inner plaintext over 2^14 bytes")))
		}
	} else if typ == recordTypeApplicationData {
		return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("application data before keys")))
	}

	switch typ {
	case recordTypeAlert:
		if len(payload) != 2 {
			return c.in.setErrorLocked(c.sendAlert(AlertDecodeError, errors.New("malformed alert")))
		}
		a := Alert(payload[1])
		if a == AlertCloseNotify {
			return c.in.setErrorLocked(io.EOF)
		}
		if a == AlertUserCanceled && payload[0] == alertLevelWarning {
			// Followed by close_notify (RFC 8446 §6.1).
			return c.countEmpty()
		}
		c.peerFatal.Store(true)
		return c.in.setErrorLocked(&AlertError{Alert: a, Remote: true})
	case recordTypeHandshake:
		if len(payload) == 0 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("empty handshake record")))
		}
		if c.hand.Len()+len(payload) > maxHandshake+4 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("handshake data too large")))
		}
		c.hand.Write(payload)
	case recordTypeApplicationData:
		if !c.isHandshakeComplete.Load() {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("application data during the handshake")))
		}
		if len(payload) == 0 {
			return c.countEmpty()
		}
		c.emptyRecords = 0
		c.keyUpdates = 0
		c.input = payload
	default:
		return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("record of type %d", typ)))
	}
	return nil
}

func (c *Conn) countEmpty() error {
	c.emptyRecords++
	if c.emptyRecords > maxEmptyRecords {
		return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("too many empty records")))
	}
	return nil
}

// sendAlert sends a fatal alert (taking c.out) and returns the error that
// reports it.
func (c *Conn) sendAlert(a Alert, cause error) error {
	c.out.Lock()
	defer c.out.Unlock()
	return c.sendAlertLocked(a, cause)
}

func (c *Conn) sendAlertLocked(a Alert, cause error) error {
	level := byte(alertLevelError)
	if a == AlertCloseNotify || a == AlertUserCanceled {
		level = alertLevelWarning
	}
	err := &AlertError{Alert: a, Err: cause}
	if c.peerFatal.Load() || c.out.err != nil {
		return err
	}
	if _, werr := c.writeRecordLocked(recordTypeAlert, []byte{level, byte(a)}); werr == nil {
		c.flush()
	}
	if a != AlertCloseNotify {
		c.out.setErrorLocked(err)
	}
	return err
}

// writeRecordLocked writes data as records of type typ, protected once
// write keys are set. The caller holds c.out.
func (c *Conn) writeRecordLocked(typ recordType, data []byte) (int, error) {
	if c.out.err != nil {
		return 0, c.out.err
	}
	written := 0
	for first := true; first || len(data) > 0; first = false {
		m := min(len(data), maxPlaintext)
		if c.sendPtr == nil {
			c.sendPtr = outputBufs.Get().(*[]byte)
			c.sendBuf = (*c.sendPtr)[:0]
		}
		out, err := c.sealRecord(c.sendBuf, typ, data[:m])
		if err != nil {
			return written, c.out.setErrorLocked(err)
		}
		c.sendBuf = out
		data = data[m:]
		written += m
		if !c.buffering && len(c.sendBuf) >= flushSize {
			if err := c.flush(); err != nil {
				return written, err
			}
		}
	}
	if !c.buffering {
		if err := c.flush(); err != nil {
			return written, err
		}
	}
	return written, nil
}

// sealRecord appends one record to out.
func (c *Conn) sealRecord(out []byte, typ recordType, payload []byte) ([]byte, error) {
	if c.out.aead == nil {
		vers := legacyVersion
		if typ == recordTypeHandshake && len(payload) > 0 && payload[0] == typeClientHello {
			vers = 0x0301 // as most clients write their first record
		}
		out = append(out, byte(typ), byte(vers>>8), byte(vers), byte(len(payload)>>8), byte(len(payload)))
		return append(out, payload...), nil
	}
	n := len(payload) + 1 + tagLen
	start := len(out)
	out = append(out, byte(recordTypeApplicationData), 3, 3, byte(n>>8), byte(n))
	out = append(out, payload...)
	out = append(out, byte(typ))
	nonce := c.out.nonce()
	hdr := out[start : start+recordHeaderLen]
	out = c.out.aead.Seal(out[:start+recordHeaderLen], nonce[:], out[start+recordHeaderLen:], hdr)
	if err := c.out.incSeq(); err != nil {
		return nil, err
	}
	return out, nil
}

// flush writes what sealRecord collected.
func (c *Conn) flush() error {
	if len(c.sendBuf) == 0 {
		return nil
	}
	_, err := c.conn.Write(c.sendBuf)
	c.sendBuf = c.sendBuf[:0]
	if !c.buffering && c.sendPtr != nil {
		// Only a buffer of the pool's size goes back (a flight may
		// have grown it).
		if cap(c.sendBuf) == cap(*c.sendPtr) {
			*c.sendPtr = c.sendBuf
			outputBufs.Put(c.sendPtr)
		}
		c.sendPtr, c.sendBuf = nil, nil
	}
	if err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

// writeHandshake writes a handshake message and adds it to the
// transcript (when given).
func (c *Conn) writeHandshake(msg []byte, transcript hash.Hash) error {
	c.out.Lock()
	defer c.out.Unlock()
	if transcript != nil {
		transcript.Write(msg)
	}
	_, err := c.writeRecordLocked(recordTypeHandshake, msg)
	return err
}

// writeChangeCipherSpec writes the compatibility change_cipher_spec.
func (c *Conn) writeChangeCipherSpec() error {
	c.out.Lock()
	defer c.out.Unlock()
	_, err := c.writeRecordLocked(recordTypeChangeCipherSpec, []byte{1})
	return err
}

// flushFlight ends a buffered flight.
func (c *Conn) flushFlight() error {
	c.out.Lock()
	defer c.out.Unlock()
	c.buffering = false
	return c.flush()
}

// readHandshakeBytes returns the next whole handshake message. The caller
// holds c.in.
func (c *Conn) readHandshakeBytes() ([]byte, error) {
	for c.hand.Len() < 4 {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
		if len(c.input) > 0 {
			return nil, c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("application data instead of a handshake message")))
		}
	}
	h := c.hand.Bytes()
	n := int(h[1])<<16 | int(h[2])<<8 | int(h[3])
	if n > maxHandshake {
		return nil, c.in.setErrorLocked(c.sendAlert(AlertIllegalParameter, fmt.Errorf("handshake message of %d bytes", n)))
	}
	for c.hand.Len() < 4+n {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
		if len(c.input) > 0 {
			return nil, c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("application data inside a handshake message")))
		}
	}
	msg := make([]byte, 4+n)
	copy(msg, c.hand.Next(4+n))
	return msg, nil
}

// readHandshake reads a handshake message of type want, adds it to the
// transcript and returns its bytes.
func (c *Conn) readHandshake(want uint8, transcript hash.Hash) ([]byte, error) {
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return nil, err
	}
	if msg[0] != want {
		return nil, c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("got %s, want %s", messageName(msg[0]), messageName(want)))
	}
	if transcript != nil {
		transcript.Write(msg)
	}
	return msg, nil
}

// setReadSecret switches reading to a new traffic secret; handshake data
// must not straddle a key change (RFC 8446 §5.1).
func (c *Conn) setReadSecret(suite *cipherSuite, secret []byte) error {
	if c.hand.Len() > 0 {
		return c.sendAlert(AlertUnexpectedMessage, errors.New("handshake message straddles a key change"))
	}
	if err := c.in.setTrafficSecret(suite, secret); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return nil
}

func (c *Conn) setWriteSecret(suite *cipherSuite, secret []byte) error {
	c.out.Lock()
	defer c.out.Unlock()
	if err := c.out.setTrafficSecret(suite, secret); err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

func messageName(typ uint8) string {
	switch typ {
	case typeClientHello:
		return "ClientHello"
	case typeServerHello:
		return "ServerHello"
	case typeNewSessionTicket:
		return "NewSessionTicket"
	case typeEndOfEarlyData:
		return "EndOfEarlyData"
	case typeEncryptedExtensions:
		return "EncryptedExtensions"
	case typeCertificate:
		return "Certificate"
	case typeCertificateRequest:
		return "CertificateRequest"
	case typeCertificateVerify:
		return "CertificateVerify"
	case typeFinished:
		return "Finished"
	case typeKeyUpdate:
		return "KeyUpdate"
	}
	return fmt.Sprintf("handshake message %d", typ)
}

// Write writes application data, running the handshake first if needed.
func (c *Conn) Write(b []byte) (int, error) {
	for {
		x := c.activeCall.Load()
		if x&1 != 0 {
			return 0, net.ErrClosed
		}
		if c.activeCall.CompareAndSwap(x, x+2) {
			break
		}
	}
	defer c.activeCall.Add(-2)
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.err != nil {
		return 0, c.out.err
	}
	if c.closeNotifySent {
		return 0, errors.New("tls13: write after close_notify")
	}
	if c.out.seq >= keyUpdateAfter {
		if err := c.updateWriteKeyLocked(false); err != nil {
			return 0, err
		}
	}
	return c.writeRecordLocked(recordTypeApplicationData, b)
}

// Read reads application data, running the handshake first if needed.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	c.in.Lock()
	defer c.in.Unlock()
	for len(c.input) == 0 {
		if c.hand.Len() > 0 {
			if err := c.handlePostHandshakeMessage(); err != nil {
				return 0, err
			}
			if c.hand.Len() == 0 {
				c.hand = bytes.Buffer{} // tickets are rare: keep no buffer
			}
			continue
		}
		if err := c.readRecord(); err != nil {
			// A timeout (an idle keep-alive connection's wait for its
			// next request) leaves the connection usable: it holds no
			// input buffer meanwhile unless part of a record came.
			c.releaseInput()
			return 0, err
		}
	}
	n := copy(b, c.input)
	c.input = c.input[n:]
	c.releaseInput()
	return n, nil
}

// handlePostHandshakeMessage processes a NewSessionTicket or KeyUpdate.
// The caller holds c.in.
func (c *Conn) handlePostHandshakeMessage() error {
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	switch msg[0] {
	case typeNewSessionTicket:
		if !c.isClient {
			return c.sendAlert(AlertUnexpectedMessage, errors.New("client sent NewSessionTicket"))
		}
		var m newSessionTicketMsg
		if !m.unmarshal(msg) {
			return c.sendAlert(AlertDecodeError, errors.New("malformed NewSessionTicket"))
		}
		c.ticketsRead++
		if c.ticketsRead <= maxTickets {
			c.storeTicket(&m)
		}
		return nil
	case typeKeyUpdate:
		var m keyUpdateMsg
		if !m.unmarshal(msg) {
			return c.sendAlert(AlertDecodeError, errors.New("malformed KeyUpdate"))
		}
		if c.hand.Len() > 0 {
			return c.sendAlert(AlertUnexpectedMessage, errors.New("KeyUpdate not at the end of its record"))
		}
		c.keyUpdates++
		if c.keyUpdates > maxKeyUpdates {
			return c.sendAlert(AlertUnexpectedMessage, errors.New("too many KeyUpdate messages"))
		}
		if err := c.in.setTrafficSecret(c.in.suite, nextTrafficSecret(c.in.secret)); err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		if m.updateRequested {
			c.out.Lock()
			defer c.out.Unlock()
			if c.closeNotifySent {
				return nil
			}
			return c.updateWriteKeyLocked(false)
		}
		return nil
	}
	return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("%s after the handshake", messageName(msg[0])))
}

// updateWriteKeyLocked sends a KeyUpdate and switches to the next write
// secret. The caller holds c.out.
func (c *Conn) updateWriteKeyLocked(requestPeer bool) error {
	m := keyUpdateMsg{updateRequested: requestPeer}
	if _, err := c.writeRecordLocked(recordTypeHandshake, m.marshal()); err != nil {
		return err
	}
	if err := c.out.setTrafficSecret(c.out.suite, nextTrafficSecret(c.out.secret)); err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

// KeyUpdate sends a KeyUpdate and switches to new write keys; with
// requestPeer the peer is asked to update its keys too (RFC 8446 §4.6.3).
func (c *Conn) KeyUpdate(requestPeer bool) error {
	if !c.isHandshakeComplete.Load() {
		return errors.New("tls13: KeyUpdate before the handshake completed")
	}
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.err != nil {
		return c.out.err
	}
	return c.updateWriteKeyLocked(requestPeer)
}

// Close sends close_notify (after a completed handshake) and closes the
// connection. A Close while a Write is blocked closes the connection at
// once, without close_notify, as crypto/tls does.
func (c *Conn) Close() error {
	var x int32
	for {
		x = c.activeCall.Load()
		if x&1 != 0 {
			return net.ErrClosed
		}
		if c.activeCall.CompareAndSwap(x, x|1) {
			break
		}
	}
	if x != 0 {
		return c.conn.Close()
	}
	var alertErr error
	if c.isHandshakeComplete.Load() && !c.peerFatal.Load() {
		if err := c.closeNotify(); err != nil {
			alertErr = fmt.Errorf("tls13: failed to send close_notify (connection closed anyway): %w", err)
		}
	}
	if err := c.conn.Close(); err != nil {
		return err
	}
	return alertErr
}

// CloseWrite sends close_notify and shuts the write side of the
// underlying connection when it can.
func (c *Conn) CloseWrite() error {
	if !c.isHandshakeComplete.Load() {
		return errors.New("tls13: CloseWrite before the handshake completed")
	}
	if err := c.closeNotify(); err != nil {
		return err
	}
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *Conn) closeNotify() error {
	c.out.Lock()
	defer c.out.Unlock()
	if !c.closeNotifySent {
		// A peer that stopped reading must not hold Close forever.
		c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.closeNotifyErr = c.sendAlertLocked(AlertCloseNotify, nil)
		var ae *AlertError
		if errors.As(c.closeNotifyErr, &ae) && ae.Alert == AlertCloseNotify {
			c.closeNotifyErr = c.out.err
		}
		c.closeNotifySent = true
		c.conn.SetWriteDeadline(time.Now())
	}
	return c.closeNotifyErr
}

// Handshake runs the handshake if it has not run yet; the first Read or
// Write does it too.
func (c *Conn) Handshake() error { return c.HandshakeContext(context.Background()) }

// HandshakeContext runs the handshake, giving up (and closing the
// connection) when ctx is done first.
func (c *Conn) HandshakeContext(ctx context.Context) (err error) {
	if c.isHandshakeComplete.Load() {
		return nil
	}
	if ctx.Done() != nil {
		if ctx.Err() != nil {
			c.conn.Close()
			return ctx.Err()
		}
		stop := context.AfterFunc(ctx, func() { c.conn.Close() })
		defer func() {
			if !stop() {
				// The context fired and closed the connection (perhaps
				// just after the handshake finished): report why.
				err = ctx.Err()
			}
		}()
	}
	c.handshakeMutex.Lock()
	defer c.handshakeMutex.Unlock()
	if c.handshakeErr != nil {
		return c.handshakeErr
	}
	if c.isHandshakeComplete.Load() {
		return nil
	}
	c.in.Lock()
	defer c.in.Unlock()
	c.handshakeErr = c.handshakeFn(ctx)
	if c.hand.Len() == 0 {
		c.hand = bytes.Buffer{}
	}
	c.releaseInput()
	if c.handshakeErr != nil {
		c.out.Lock()
		c.buffering = false
		c.flush()
		c.out.Unlock()
	} else if !c.isHandshakeComplete.Load() {
		c.handshakeErr = errors.New("tls13: internal error: handshake ended without a result")
	}
	return c.handshakeErr
}

// ConnectionState returns the state of the connection.
func (c *Conn) ConnectionState() ConnectionState {
	c.handshakeMutex.Lock()
	defer c.handshakeMutex.Unlock()
	return c.connectionStateLocked()
}

func (c *Conn) connectionStateLocked() ConnectionState {
	st := ConnectionState{
		HandshakeComplete:    c.isHandshakeComplete.Load(),
		DidResume:            c.didResume,
		CipherSuite:          c.cipherSuite,
		Group:                c.group,
		DidHelloRetryRequest: c.didHRR,
		NegotiatedProtocol:   c.negotiatedProtocol,
		ServerName:           c.serverName,
		PeerCertificates:     c.peerCertificates,
		VerifiedChains:       c.verifiedChains,
	}
	if c.cipherSuite != 0 {
		st.Version = VersionTLS13
	}
	return st
}

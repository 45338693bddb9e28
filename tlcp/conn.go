package tlcp

// The connection: the record layer (reading, writing, batching, alerts,
// buffers given back when idle) and the Conn API. It is one file, longer
// than most, for the reason crypto/tls's conn.go is: the read and write
// paths share the connection's state and locks, and split across files
// they would be read apart from the invariants they keep together.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Conn is a TLCP connection over a net.Conn. Read and Write may be called
// concurrently with each other; the first error of each direction sticks.
type Conn struct {
	conn     net.Conn
	isClient bool
	config   *Config

	handshakeMutex      sync.Mutex
	handshakeErr        error
	isHandshakeComplete atomic.Bool
	handshakes          int

	// Negotiated state, written by the handshake under handshakeMutex.
	haveVers           bool
	cipherSuite        uint16
	didResume          bool
	serverName         string
	negotiatedProtocol string
	peerCertificates   []*smx509.Certificate
	verifiedChains     [][]*smx509.Certificate
	// ocspResponse is the server's stapled OCSP response (client side).
	ocspResponse []byte
	sessionID    []byte

	// GM-capable TLS clients (tlshello.go). acceptTLSHello lets a server
	// take a ClientHello in TLS form that offers TLCP suites; tlsHello
	// records that this handshake's hello was one. helloOverride is the
	// hello a ClientWithHello client sends as it is. plainVers, when not
	// zero, is the version of the plaintext records written before the
	// version is settled: the client's hello record, or the alerts a
	// server sends in answer to a TLS record.
	acceptTLSHello bool
	tlsHello       bool
	helloOverride  *clientHelloMsg
	plainVers      uint16

	in, out halfConn

	// Raw input: rawBuf[rawR:rawW] is unread. rawBuf is borrowed from
	// smallBufs, or from largeBufs for big records, and given back once
	// Read has consumed it, so that an idle connection holds none.
	rawBuf     []byte
	rawR, rawW int
	rawPool    *sync.Pool   // where rawBuf came from
	rawPtr     *[]byte      // what rawPool gave
	input      []byte       // decrypted application data not yet returned
	hand       bytes.Buffer // handshake data not yet parsed
	// handPtr is what smallBufs gave for hand during the handshake.
	handPtr       *[]byte
	emptyRecords  int // consecutive empty application records
	warnAlerts    int // warning alerts received in a row
	renegAttempts int

	// buffering collects a whole flight in sendBuf so that it leaves in one
	// write.
	buffering bool
	sendBuf   []byte
	sendPtr   *[]byte // what flightBufs gave for sendBuf

	closeNotifySent bool
	closeNotifyErr  error
	// dataSent is set by the first Write of application data (under
	// c.out), peerDone when the peer's close_notify or a clean end of its
	// stream has been read: see Close.
	dataSent   bool
	peerDone   atomic.Bool
	activeCall atomic.Int32
	// peerFatal is the fatal alert the peer sent, if any: after it the
	// connection is over, and nothing more is written (RFC 5246 §7.2.2).
	peerFatal atomic.Pointer[AlertError]
}

// halfConn is the record state of one direction.
type halfConn struct {
	sync.Mutex
	err        error
	cipher     recordCipher // nil before ChangeCipherSpec
	nextCipher recordCipher
	seq        uint64
}

func (hc *halfConn) setErrorLocked(err error) error {
	if e, ok := err.(net.Error); ok {
		hc.err = &permanentError{err: e}
	} else {
		hc.err = err
	}
	return err
}

// changeCipherSpec switches to the prepared cipher and resets the sequence
// number.
func (hc *halfConn) changeCipherSpec() error {
	if hc.nextCipher == nil {
		return errors.New("tlcp: ChangeCipherSpec before keys were established")
	}
	hc.cipher = hc.nextCipher
	hc.nextCipher = nil
	hc.seq = 0
	return nil
}

func (hc *halfConn) incSeq() error {
	hc.seq++
	if hc.seq == 0 {
		// 2^64 records: the standard forbids wrapping.
		return errors.New("tlcp: sequence number wrapped")
	}
	return nil
}

type permanentError struct{ err net.Error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Timeout() bool   { return e.err.Timeout() }
func (e *permanentError) Temporary() bool { return false }

// smallBufs hold input of small records and the headers of big ones,
// largeBufs input buffers big enough for any record; writeBufs hold a few
// sealed records so that bulk writes leave in large writes.
var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, 1536); return &b }}
	largeBufs = sync.Pool{New: func() any { b := make([]byte, recordHeaderLen+maxCiphertext+256); return &b }}
	writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, writeFlushSize+recordHeaderLen+maxCiphertext); return &b }}
	// flightBufs collect a handshake flight (a server's first flight with
	// a certificate chain fits in a few kilobytes) or seal a small write.
	flightBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

// writeFlushSize is how much sealed data Write collects before writing.
const writeFlushSize = 4 * (recordHeaderLen + maxPlaintext + 64)

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetDeadline sets the read and write deadlines of the underlying
// connection. A Write that times out leaves the connection unusable.
func (c *Conn) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline of the underlying connection.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// NetConn returns the underlying connection. Writing to or reading from it
// directly corrupts the TLCP session.
func (c *Conn) NetConn() net.Conn { return c.conn }

// fill makes at least n unread bytes available in rawBuf, reading as much
// as the buffer holds in each call so that a whole flight usually arrives
// in one read.
func (c *Conn) fill(n int) error {
	if c.rawBuf == nil {
		c.borrowRaw(&smallBufs)
	}
	if c.rawW-c.rawR >= n {
		return nil
	}
	if len(c.rawBuf)-c.rawR < n {
		if n <= len(c.rawBuf) {
			copy(c.rawBuf, c.rawBuf[c.rawR:c.rawW])
		} else {
			small := c.rawPtr
			pool := c.rawPool
			c.borrowRaw(&largeBufs)
			copy(c.rawBuf, (*small)[c.rawR:c.rawW])
			pool.Put(small)
		}
		c.rawW -= c.rawR
		c.rawR = 0
	}
	for c.rawW-c.rawR < n {
		m, err := c.conn.Read(c.rawBuf[c.rawW:])
		if m < 0 {
			return errors.New("tlcp: underlying Read returned a negative count")
		}
		c.rawW += m
		if err != nil {
			if c.rawW-c.rawR >= n {
				return nil
			}
			if err == io.EOF && c.rawW-c.rawR > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// borrowRaw makes a buffer from pool the input buffer.
func (c *Conn) borrowRaw(pool *sync.Pool) {
	c.rawPtr = pool.Get().(*[]byte)
	c.rawPool = pool
	c.rawBuf = *c.rawPtr
}

// maybeReleaseRaw gives the input buffer back once all its data has been
// consumed, so that idle connections hold none.
func (c *Conn) maybeReleaseRaw() {
	if c.rawBuf != nil && c.rawR == c.rawW && len(c.input) == 0 {
		c.rawPool.Put(c.rawPtr)
		c.rawBuf, c.rawPtr, c.rawPool = nil, nil, nil
		c.rawR, c.rawW = 0, 0
	}
}

// readRecord reads one record and handles it: application data goes to
// c.input, handshake data to c.hand, alerts and ChangeCipherSpec are acted
// upon. c.in must be locked.
func (c *Conn) readRecord() error { return c.readRecordOrCCS(false) }

func (c *Conn) readChangeCipherSpec() error { return c.readRecordOrCCS(true) }

func (c *Conn) readRecordOrCCS(expectChangeCipherSpec bool) error {
	if c.in.err != nil {
		return c.in.err
	}
	handshakeComplete := c.isHandshakeComplete.Load()
	if len(c.input) > 0 {
		return errors.New("tlcp: internal error: reading a record with unread data")
	}
	c.input = nil

	if err := c.fill(recordHeaderLen); err != nil {
		return c.readError(err)
	}
	hdr := c.rawBuf[c.rawR : c.rawR+recordHeaderLen]
	typ := recordType(hdr[0])
	vers := uint16(hdr[1])<<8 | uint16(hdr[2])
	n := int(hdr[3])<<8 | int(hdr[4])
	if c.haveVers {
		if vers != VersionTLCP {
			return c.in.setErrorLocked(c.sendAlert(AlertProtocolVersion, fmt.Errorf("record version %#04x, want %#04x", vers, VersionTLCP)))
		}
	} else {
		// The first record must look like a handshake (or alert) record of
		// some TLS-family protocol; anything else is not a peer of ours.
		if (typ != recordTypeHandshake && typ != recordTypeAlert) || vers >= 0x1000 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("first record does not look like TLCP")))
		}
		if !c.isClient && vers>>8 == 3 {
			// A TLS client: alerts go back in its record version, which
			// it can read (OpenSSL and Tongsuo do the same).
			c.plainVers = vers
		}
	}
	if n > maxCiphertext {
		return c.in.setErrorLocked(c.sendAlert(AlertRecordOverflow, fmt.Errorf("record of %d bytes exceeds the limit of %d", n, maxCiphertext)))
	}
	if err := c.fill(recordHeaderLen + n); err != nil {
		return c.readError(err)
	}
	record := c.rawBuf[c.rawR : c.rawR+recordHeaderLen+n]
	c.rawR += recordHeaderLen + n

	data := record[recordHeaderLen:]
	if c.in.cipher != nil {
		var err error
		data, err = c.in.cipher.open(record, c.in.seq)
		if err != nil {
			return c.in.setErrorLocked(c.sendAlert(AlertBadRecordMAC, err))
		}
	}
	if len(data) > maxPlaintext {
		return c.in.setErrorLocked(c.sendAlert(AlertRecordOverflow, errors.New("plaintext exceeds 2^14 bytes")))
	}
	if err := c.in.incSeq(); err != nil {
		return c.in.setErrorLocked(c.sendAlert(AlertInternalError, err))
	}
	if typ != recordTypeAlert && len(data) > 0 {
		c.warnAlerts = 0
	}

	switch typ {
	default:
		return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("unknown record type %d", typ)))

	case recordTypeAlert:
		if len(data) != 2 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("malformed alert record")))
		}
		level, desc := data[0], Alert(data[1])
		if desc == AlertCloseNotify {
			c.peerDone.Store(true)
			return c.in.setErrorLocked(io.EOF)
		}
		if level == alertLevelWarning {
			// Warnings (no_renegotiation, user_canceled) carry nothing we
			// act on, but a stream of them is an attack on our loop.
			c.warnAlerts++
			if c.warnAlerts > 16 {
				return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("too many warning alerts")))
			}
			return c.retryReadRecord(expectChangeCipherSpec)
		}
		err := &AlertError{Alert: desc, Remote: true}
		c.peerFatal.Store(err)
		return c.in.setErrorLocked(err)

	case recordTypeChangeCipherSpec:
		if len(data) != 1 || data[0] != 1 {
			return c.in.setErrorLocked(c.sendAlert(AlertDecodeError, errors.New("malformed ChangeCipherSpec")))
		}
		if !expectChangeCipherSpec || c.hand.Len() > 0 {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("unexpected ChangeCipherSpec")))
		}
		if err := c.in.changeCipherSpec(); err != nil {
			return c.in.setErrorLocked(c.sendAlert(AlertInternalError, err))
		}

	case recordTypeApplicationData:
		if !handshakeComplete || expectChangeCipherSpec {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("application data before the handshake completed")))
		}
		if len(data) == 0 {
			// Empty records are legal (CBC countermeasures) but an endless
			// run of them would keep us spinning.
			c.emptyRecords++
			if c.emptyRecords > 100 {
				return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("too many empty records")))
			}
			return c.retryReadRecord(expectChangeCipherSpec)
		}
		c.emptyRecords = 0
		c.input = data

	case recordTypeHandshake:
		if len(data) == 0 || expectChangeCipherSpec {
			return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("unexpected handshake record")))
		}
		if c.hand.Cap() == 0 && c.handPtr == nil && !handshakeComplete {
			// A handshake's flights are collected in a pooled buffer,
			// given back when it completes (releaseHand).
			c.handPtr = smallBufs.Get().(*[]byte)
			c.hand = *bytes.NewBuffer((*c.handPtr)[:0])
		}
		c.hand.Write(data)
	}
	return nil
}

// releaseHand gives back, cleared, the pooled buffer the handshake's
// flights were collected in; hand must be empty and no longer use it.
func (c *Conn) releaseHand() {
	if c.handPtr != nil {
		clear(*c.handPtr)
		smallBufs.Put(c.handPtr)
		c.handPtr = nil
	}
}

// readError handles a failed read from the network: a record cut short by
// the peer's close gets a decode_error alert (which a half-closed peer can
// still read); timeouts are not sticky, so the caller may extend the
// deadline and read on.
func (c *Conn) readError(err error) error {
	if err == io.ErrUnexpectedEOF {
		return c.in.setErrorLocked(c.sendAlert(AlertDecodeError, fmt.Errorf("record truncated: %w", err)))
	}
	if err == io.EOF {
		c.peerDone.Store(true)
	}
	if e, ok := err.(net.Error); !ok || !e.Timeout() {
		c.in.setErrorLocked(err)
	}
	return err
}

func (c *Conn) retryReadRecord(expectChangeCipherSpec bool) error {
	return c.readRecordOrCCS(expectChangeCipherSpec)
}

// sendAlert sends a fatal alert (or a warning for close_notify and
// no_renegotiation) and returns the error that describes it.
func (c *Conn) sendAlert(a Alert, cause error) error {
	c.out.Lock()
	defer c.out.Unlock()
	return c.sendAlertLocked(a, cause)
}

func (c *Conn) sendAlertLocked(a Alert, cause error) error {
	level := byte(alertLevelError)
	if a == AlertNoRenegotiation || a == AlertCloseNotify {
		level = alertLevelWarning
	}
	// An alert ends whatever flight was being put together: send it alone
	// and now.
	c.buffering = false
	c.releaseSendBuf()
	_, werr := c.writeRecordLocked(recordTypeAlert, []byte{level, byte(a)})
	if a == AlertCloseNotify {
		return werr
	}
	err := &AlertError{Alert: a, Err: cause}
	if level == alertLevelError {
		c.out.setErrorLocked(err)
	}
	return err
}

// writeRecordLocked protects data as records of type typ (fragmented at
// 2^14) and writes them, or keeps them in sendBuf while buffering. c.out
// must be locked.
func (c *Conn) writeRecordLocked(typ recordType, data []byte) (int, error) {
	if c.out.err != nil {
		return 0, c.out.err
	}
	var outBuf []byte
	var pool *sync.Pool
	var borrowed *[]byte
	switch {
	case c.buffering:
		outBuf = c.sendBuf
		if outBuf == nil {
			c.sendPtr = flightBufs.Get().(*[]byte)
			outBuf = (*c.sendPtr)[:0]
		}
	case len(data) > 2048:
		pool = &writeBufs
	default:
		// Small writes borrow a flight buffer, so that an idle
		// connection keeps no write buffer.
		pool = &flightBufs
	}
	if pool != nil {
		borrowed = pool.Get().(*[]byte)
		outBuf = (*borrowed)[:0]
	}
	written := 0
	for len(data) > 0 || written == 0 {
		var m int
		var err error
		outBuf, m, err = c.sealRecords(outBuf, typ, data)
		if err != nil {
			return written, c.out.setErrorLocked(err)
		}
		data = data[m:]
		written += m
		if typ == recordTypeChangeCipherSpec {
			if err := c.out.changeCipherSpec(); err != nil {
				return written, c.out.setErrorLocked(err)
			}
		}
		// Keep writes large but bounded: flush every few records.
		if !c.buffering && len(outBuf) >= writeFlushSize {
			if err := c.writeRaw(outBuf); err != nil {
				return written, err
			}
			outBuf = outBuf[:0]
		}
		if m == 0 {
			break
		}
	}
	if c.buffering {
		c.sendBuf = outBuf
		return written, nil
	}
	err := c.writeRaw(outBuf)
	if borrowed != nil {
		*borrowed = outBuf[:0]
		pool.Put(borrowed)
	}
	return written, err
}

// sealRecords seals a prefix of data, at most maxPlaintext bytes unless
// the cipher seals bulk application data in batches, and returns how much
// it took.
func (c *Conn) sealRecords(out []byte, typ recordType, data []byte) ([]byte, int, error) {
	if bs, ok := c.out.cipher.(batchSealer); ok && typ == recordTypeApplicationData && c.out.seq < math.MaxUint64-maxBatchRecords {
		out, m, records, err := bs.sealBatch(out, typ, data, c.out.seq, c.config.rand())
		if err != nil {
			return out, 0, err
		}
		c.out.seq += uint64(records)
		return out, m, nil
	}
	m := min(len(data), maxPlaintext)
	out, err := c.sealRecord(out, typ, data[:m])
	return out, m, err
}

func (c *Conn) sealRecord(out []byte, typ recordType, payload []byte) ([]byte, error) {
	var err error
	if c.out.cipher == nil {
		if c.plainVers != 0 && !c.haveVers {
			out = append(out, byte(typ), byte(c.plainVers>>8), byte(c.plainVers), byte(len(payload)>>8), byte(len(payload)))
		} else {
			out = appendRecordHeader(out, typ, len(payload))
		}
		out = append(out, payload...)
	} else {
		out, err = c.out.cipher.seal(out, typ, payload, c.out.seq, c.config.rand())
		if err != nil {
			return out, err
		}
	}
	return out, c.out.incSeq()
}

func (c *Conn) writeRaw(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := c.peerFatal.Load(); err != nil {
		return c.out.setErrorLocked(err)
	}
	if _, err := c.conn.Write(b); err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

// releaseSendBuf returns the flight buffer to its pool.
func (c *Conn) releaseSendBuf() {
	if c.sendPtr != nil && cap(c.sendBuf) <= 64<<10 {
		*c.sendPtr = c.sendBuf[:0]
		flightBufs.Put(c.sendPtr)
	}
	c.sendBuf, c.sendPtr = nil, nil
}

// flush writes the buffered flight. c.out must not be locked.
func (c *Conn) flush() error {
	c.out.Lock()
	defer c.out.Unlock()
	if len(c.sendBuf) == 0 {
		return nil
	}
	err := c.writeRaw(c.sendBuf)
	c.releaseSendBuf()
	return err
}

// writeHandshake sends one handshake message in its own record(s) (GmSSL
// rejects records that hold more than one) and adds it to the transcript.
func (c *Conn) writeHandshake(msg handshakeMessage, transcript io.Writer) error {
	var data []byte
	var err error
	if a, ok := msg.(messageAppender); ok {
		// Built in a flight buffer, which the record takes a copy of.
		scratch := flightBufs.Get().(*[]byte)
		defer func() {
			if data != nil && cap(data) <= 64<<10 {
				*scratch = data[:0]
			}
			flightBufs.Put(scratch)
		}()
		data, err = a.appendTo((*scratch)[:0])
	} else {
		data, err = msg.marshal()
	}
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if transcript != nil {
		transcript.Write(data)
	}
	c.out.Lock()
	defer c.out.Unlock()
	_, err = c.writeRecordLocked(recordTypeHandshake, data)
	return err
}

// changeCipherSpecPayload is the body of a ChangeCipherSpec record; it is
// only read.
var changeCipherSpecPayload = []byte{1}

func (c *Conn) writeChangeCipherSpec() error {
	c.out.Lock()
	defer c.out.Unlock()
	_, err := c.writeRecordLocked(recordTypeChangeCipherSpec, changeCipherSpecPayload)
	return err
}

// readHandshake reads the next handshake message, adds it to the
// transcript when one is given, and returns it parsed.
func (c *Conn) readHandshake(transcript io.Writer) (any, error) {
	for c.hand.Len() < 4 {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
	}
	head := c.hand.Bytes()
	n := int(head[1])<<16 | int(head[2])<<8 | int(head[3])
	if n > maxHandshake {
		return nil, c.in.setErrorLocked(c.sendAlert(AlertIllegalParameter, fmt.Errorf("handshake message of %d bytes exceeds the limit of %d", n, maxHandshake)))
	}
	for c.hand.Len() < 4+n {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
	}
	data := bytes.Clone(c.hand.Next(4 + n))
	if c.hand.Len() == 0 {
		c.hand.Reset()
	}
	msg := newHandshakeMessage(data[0])
	if msg == nil {
		return nil, c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("unknown handshake message type %d", data[0])))
	}
	if !msg.unmarshal(data) {
		return nil, c.in.setErrorLocked(c.sendAlert(AlertDecodeError, fmt.Errorf("malformed %s", messageName(data[0]))))
	}
	if transcript != nil {
		transcript.Write(data)
	}
	return msg, nil
}

func messageName(typ uint8) string {
	switch typ {
	case typeHelloRequest:
		return "HelloRequest"
	case typeClientHello:
		return "ClientHello"
	case typeServerHello:
		return "ServerHello"
	case typeCertificate:
		return "Certificate"
	case typeServerKeyExchange:
		return "ServerKeyExchange"
	case typeCertificateRequest:
		return "CertificateRequest"
	case typeServerHelloDone:
		return "ServerHelloDone"
	case typeCertificateVerify:
		return "CertificateVerify"
	case typeClientKeyExchange:
		return "ClientKeyExchange"
	case typeFinished:
		return "Finished"
	case typeCertificateStatus:
		return "CertificateStatus"
	}
	return fmt.Sprintf("message type %d", typ)
}

// unexpectedMessageError sends unexpected_message for a message of the
// wrong type.
func (c *Conn) unexpectedMessageError(want string, got any) error {
	return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("received %T, want %s", got, want))
}

// Write writes data as application records, handshaking first if needed.
func (c *Conn) Write(b []byte) (int, error) {
	// Close waits for active calls; a Write racing with Close must see it.
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
		return 0, errShutdown
	}
	if len(b) == 0 {
		return 0, nil
	}
	c.dataSent = true
	return c.writeRecordLocked(recordTypeApplicationData, b)
}

var errShutdown = errors.New("tlcp: protocol is shutdown")

// Read reads application data, handshaking first if needed. It returns
// io.EOF after the peer's close_notify.
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
		if err := c.readRecord(); err != nil {
			// The peer's end, an error, a timeout: whatever comes next
			// starts with an empty buffer, if any.
			c.maybeReleaseRaw()
			return 0, err
		}
		for c.hand.Len() > 0 {
			if err := c.handlePostHandshakeMessage(); err != nil {
				return 0, err
			}
		}
	}
	n := copy(b, c.input)
	c.input = c.input[n:]
	c.maybeReleaseRaw()
	return n, nil
}

// handlePostHandshakeMessage refuses renegotiation: a HelloRequest (client)
// or ClientHello (server) gets a no_renegotiation warning; anything else is
// fatal.
func (c *Conn) handlePostHandshakeMessage() error {
	msg, err := c.readHandshake(nil)
	if err != nil {
		return err
	}
	c.renegAttempts++
	if c.renegAttempts > 8 {
		return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, errors.New("too many renegotiation attempts")))
	}
	refuse := false
	switch msg.(type) {
	case *helloRequestMsg:
		refuse = c.isClient
	case *clientHelloMsg:
		refuse = !c.isClient
	}
	if refuse {
		// A warning: the connection carries on as it was. A failed write
		// sticks on c.out and surfaces on the next Write.
		c.sendAlert(AlertNoRenegotiation, nil)
		return nil
	}
	return c.in.setErrorLocked(c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("unexpected %T after the handshake", msg)))
}

// Close sends close_notify (after a completed handshake, unless the peer
// ended the connection with a fatal alert) and closes the connection.
//
// As nginx does, it does not send close_notify to a peer that has ended
// its side (sent close_notify, or closed its stream between records)
// before any application data was written to it: there is no data of
// ours whose end the peer could need to check, and the write would only
// cost a system call on every handshake-only connection (a load
// balancer's health check, a client that only tests). Once data has been
// written, close_notify is sent as before, so that a peer that half-closed
// and reads on learns that our data ended whole.
//
// A Close that comes while a Write is in progress (to break a Write that a
// peer which does not read has blocked) closes the connection at once,
// without close_notify, as crypto/tls does.
func (c *Conn) Close() error {
	// Interlock with Write: no new Write after this point.
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
		// A Write is in flight, perhaps blocked on a peer that does not
		// read while it holds c.out: this Close is there to break it.
		// close_notify would wait for it, so it is left out.
		return c.conn.Close()
	}
	var alertErr error
	if c.isHandshakeComplete.Load() && c.peerFatal.Load() == nil && !c.quietClose() {
		if err := c.closeNotify(); err != nil {
			alertErr = fmt.Errorf("tlcp: failed to send closeNotify alert (but connection was closed anyway): %w", err)
		}
	}
	if err := c.conn.Close(); err != nil {
		return err
	}
	return alertErr
}

// CloseWrite sends close_notify and shuts down the write side of the
// underlying connection when it supports that (as *net.TCPConn does), so
// the peer reads EOF while this side can still read.
func (c *Conn) CloseWrite() error {
	if !c.isHandshakeComplete.Load() {
		return errors.New("tlcp: CloseWrite called before handshake complete")
	}
	if err := c.closeNotify(); err != nil {
		return err
	}
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// quietClose reports whether Close can leave out close_notify: the peer
// has ended its side and no application data has been written.
func (c *Conn) quietClose() bool {
	if !c.peerDone.Load() {
		return false
	}
	c.out.Lock()
	defer c.out.Unlock()
	return !c.dataSent && !c.closeNotifySent
}

func (c *Conn) closeNotify() error {
	c.out.Lock()
	defer c.out.Unlock()
	if !c.closeNotifySent {
		// Do not let a peer that stopped reading hold Close forever.
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.closeNotifyErr = c.sendAlertLocked(AlertCloseNotify, nil)
		c.closeNotifySent = true
		c.SetWriteDeadline(time.Now())
	}
	return c.closeNotifyErr
}

// Handshake runs the handshake if it has not run yet. Most uses need not
// call it: the first Read or Write does.
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
	if err := c.handshakeErr; err != nil {
		return err
	}
	if c.isHandshakeComplete.Load() {
		return nil
	}
	c.in.Lock()
	defer c.in.Unlock()

	if c.isClient {
		c.handshakeErr = c.clientHandshake(ctx)
	} else {
		c.handshakeErr = c.serverHandshake(ctx)
	}
	if c.handshakeErr == nil {
		c.handshakes++
		if c.hand.Len() == 0 {
			// Drop the buffer that held the peer's flights.
			c.hand = bytes.Buffer{}
			c.releaseHand()
		}
		// And give back the input buffer, unless the peer's first data
		// came with its last flight: a connection that only handshakes
		// (a health check, a client that tests) would otherwise drop it
		// for the garbage collector, and one that waits for its first
		// request would hold it.
		c.maybeReleaseRaw()
	} else {
		// A handshake error leaves the connection unusable for data too.
		c.flush()
	}
	if c.handshakeErr == nil && !c.isHandshakeComplete.Load() {
		c.handshakeErr = errors.New("tlcp: internal error: handshake should have had a result")
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
	var st ConnectionState
	st.HandshakeComplete = c.isHandshakeComplete.Load()
	if c.haveVers {
		st.Version = VersionTLCP
	}
	st.CipherSuite = c.cipherSuite
	st.DidResume = c.didResume
	st.ServerName = c.serverName
	st.NegotiatedProtocol = c.negotiatedProtocol
	st.PeerCertificates = c.peerCertificates
	st.VerifiedChains = c.verifiedChains
	st.SessionID = c.sessionID
	st.TLSFormHello = c.tlsHello
	st.OCSPResponse = c.ocspResponse
	return st
}

// transcript is the running SM3 hash of the handshake messages; it also
// keeps the raw messages when a CertificateVerify in GmSSL's form (signed
// over the raw transcript) may need checking.
type transcript struct {
	h   hash.Hash
	raw []byte
	// keepRaw is set when the raw transcript is needed.
	keepRaw bool
}

func (t *transcript) Write(p []byte) (int, error) {
	t.h.Write(p)
	if t.keepRaw {
		t.raw = append(t.raw, p...)
	}
	return len(p), nil
}

func (t *transcript) sum() []byte { return t.h.Sum(nil) }

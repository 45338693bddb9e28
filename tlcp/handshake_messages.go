package tlcp

import (
	"bytes"
	"fmt"
	"slices"

	"golang.org/x/crypto/cryptobyte"
)

// handshakeMessage is one TLCP handshake message. marshal returns the whole
// message (type, 24-bit length and body); unmarshal takes the same and
// reports false for anything malformed, never panicking.
type handshakeMessage interface {
	marshal() ([]byte, error)
	unmarshal([]byte) bool
}

// messageAppender is a handshake message that can be written at the end
// of a buffer: writeHandshake builds the messages of a handshake's
// flights in a buffer kept for the next, not in one of their own.
type messageAppender interface {
	// appendTo appends what marshal returns to b, without keeping it as
	// the message's raw bytes.
	appendTo(b []byte) ([]byte, error)
}

// builder writes a handshake message with appends and back-patched
// length prefixes: marshaling allocates only the message itself. The first
// length that does not fit is kept as the error.
type builder struct {
	b []byte
	// start is where the message begins in b.
	start int
	err   error
}

// newMessage starts a handshake message of type typ; sizeHint is the
// expected body size.
func newMessage(typ uint8, sizeHint int) *builder {
	return appendMessage(make([]byte, 0, 4+sizeHint), typ)
}

// appendMessage starts a handshake message of type typ at the end of b.
func appendMessage(b []byte, typ uint8) *builder {
	return &builder{b: append(b, typ, 0, 0, 0), start: len(b)}
}

func (w *builder) u8(v uint8)   { w.b = append(w.b, v) }
func (w *builder) u16(v uint16) { w.b = append(w.b, byte(v>>8), byte(v)) }
func (w *builder) raw(v []byte) { w.b = append(w.b, v...) }

// open reserves an n-byte length prefix and returns where it starts.
func (w *builder) open(n int) int {
	pos := len(w.b)
	w.b = append(w.b, make([]byte, n)...)
	return pos
}

// close fills in the n-byte length prefix at pos.
func (w *builder) close(pos, n int) {
	l := len(w.b) - pos - n
	if l >= 1<<(8*n) {
		if w.err == nil {
			w.err = fmt.Errorf("tlcp: field of %d bytes exceeds its %d-byte length prefix", l, n)
		}
		return
	}
	for i := n - 1; i >= 0; i-- {
		w.b[pos+i] = byte(l)
		l >>= 8
	}
}

func (w *builder) vec(n int, v []byte) {
	pos := w.open(n)
	w.raw(v)
	w.close(pos, n)
}

// finish fills in the message length and returns the buffer the message
// was written to, which ends with it.
func (w *builder) finish() ([]byte, error) {
	w.close(w.start+1, 3)
	return w.b, w.err
}

// readBody checks the message header and returns the body.
func readBody(data []byte, typ uint8) (cryptobyte.String, bool) {
	s := cryptobyte.String(data)
	var t uint8
	var body cryptobyte.String
	if !s.ReadUint8(&t) || t != typ || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() {
		return nil, false
	}
	return body, true
}

type clientHelloMsg struct {
	raw                []byte
	vers               uint16
	random             []byte
	sessionID          []byte
	cipherSuites       []uint16
	compressionMethods []uint8
	// hasExtensions records whether an extensions block was present at all.
	hasExtensions bool
	serverName    string
	alpnProtocols []string
	// ocspStapling is a status_request extension of type ocsp.
	ocspStapling bool
	// extensionTypes lists every extension seen, in order.
	extensionTypes []uint16
}

func (m *clientHelloMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	w := newMessage(typeClientHello, 80+2*len(m.cipherSuites)+len(m.serverName))
	w.u16(m.vers)
	w.raw(m.random)
	w.vec(1, m.sessionID)
	suites := w.open(2)
	for _, s := range m.cipherSuites {
		w.u16(s)
	}
	w.close(suites, 2)
	w.vec(1, m.compressionMethods)
	if m.serverName != "" || len(m.alpnProtocols) > 0 || m.ocspStapling || m.hasExtensions {
		exts := w.open(2)
		if m.serverName != "" {
			w.u16(extensionServerName)
			ext := w.open(2)
			list := w.open(2)
			w.u8(0) // host_name
			w.vec(2, []byte(m.serverName))
			w.close(list, 2)
			w.close(ext, 2)
		}
		if len(m.alpnProtocols) > 0 {
			w.u16(extensionALPN)
			ext := w.open(2)
			addALPNList(w, m.alpnProtocols)
			w.close(ext, 2)
		}
		if m.ocspStapling {
			w.u16(extensionStatusRequest)
			w.u16(5)
			w.u8(statusTypeOCSP)
			w.u16(0) // responder_id_list
			w.u16(0) // request_extensions
		}
		w.close(exts, 2)
	}
	raw, err := w.finish()
	m.raw = raw
	return raw, err
}

func addALPNList(w *builder, protos []string) {
	list := w.open(2)
	for _, p := range protos {
		w.vec(1, []byte(p))
	}
	w.close(list, 2)
}

func (m *clientHelloMsg) unmarshal(data []byte) bool {
	*m = clientHelloMsg{raw: data}
	s, ok := readBody(data, typeClientHello)
	if !ok {
		return false
	}
	var suites, compression cryptobyte.String
	if !s.ReadUint16(&m.vers) || !s.ReadBytes(&m.random, 32) ||
		!readUint8Bytes(&s, &m.sessionID) || len(m.sessionID) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 || len(suites) == 0 ||
		!s.ReadUint8LengthPrefixed(&compression) || len(compression) == 0 {
		return false
	}
	for !suites.Empty() {
		var id uint16
		suites.ReadUint16(&id)
		m.cipherSuites = append(m.cipherSuites, id)
	}
	m.compressionMethods = slices.Clone(compression)
	if s.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return false
	}
	m.hasExtensions = true
	var seen extensionSet
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) {
			return false
		}
		if len(m.extensionTypes) == maxHelloExtensions || !seen.add(typ) {
			return false // too many, or a duplicate
		}
		m.extensionTypes = append(m.extensionTypes, typ)
		switch typ {
		case extensionServerName:
			var names cryptobyte.String
			if !ext.ReadUint16LengthPrefixed(&names) || names.Empty() || !ext.Empty() {
				return false
			}
			for !names.Empty() {
				var nameType uint8
				var name cryptobyte.String
				if !names.ReadUint8(&nameType) || !names.ReadUint16LengthPrefixed(&name) || len(name) == 0 {
					return false
				}
				if nameType != 0 {
					continue
				}
				// One host name, and a valid one: it ends up in logs and
				// in the session cache. (A trailing dot is allowed in DNS
				// but not in SNI.)
				if m.serverName != "" || !validServerName(name) {
					return false
				}
				m.serverName = string(name)
			}
		case extensionALPN:
			protos, ok := readALPNList(&ext)
			if !ok || len(protos) == 0 || !ext.Empty() {
				return false
			}
			m.alpnProtocols = protos
		case extensionStatusRequest:
			// Only the type counts: responder IDs and request
			// extensions are not honoured (the staple is the one the
			// server has).
			var statusType uint8
			if !ext.ReadUint8(&statusType) {
				return false
			}
			m.ocspStapling = statusType == statusTypeOCSP
		}
	}
	return true
}

// maxHelloExtensions bounds the extensions of a hello. Deployed TLCP
// clients send a handful; a hello stuffed with thousands of empty
// extensions is refused before it costs anything.
const maxHelloExtensions = 64

// extensionSet records the extension types seen in one hello, so that a
// duplicate is found in constant time whatever the number of extensions.
type extensionSet [1 << 16 / 64]uint64

// add records typ and reports whether it was new.
func (s *extensionSet) add(typ uint16) bool {
	w, bit := typ/64, uint64(1)<<(typ%64)
	if s[w]&bit != 0 {
		return false
	}
	s[w] |= bit
	return true
}

// maxServerNameLen is the longest DNS name (RFC 1035 §2.3.4).
const maxServerNameLen = 255

// validServerName reports whether name is a host name as SNI carries it:
// at most 255 bytes of dot-separated labels of 1 to 63 letters, digits,
// hyphens or underscores. IP literals (which RFC 6066 forbids) other than
// dotted IPv4 and trailing dots do not pass.
func validServerName(name []byte) bool {
	if len(name) == 0 || len(name) > maxServerNameLen {
		return false
	}
	label := 0
	for _, c := range name {
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0
}

func readALPNList(s *cryptobyte.String) ([]string, bool) {
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) {
		return nil, false
	}
	var protos []string
	for !list.Empty() {
		var p cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&p) || p.Empty() {
			return nil, false
		}
		protos = append(protos, string(p))
	}
	return protos, true
}

func readUint8Bytes(s *cryptobyte.String, out *[]byte) bool {
	var v cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&v) {
		return false
	}
	*out = v
	return true
}

func readUint16Bytes(s *cryptobyte.String, out *[]byte) bool {
	var v cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&v) {
		return false
	}
	*out = v
	return true
}

type serverHelloMsg struct {
	raw               []byte
	vers              uint16
	random            []byte
	sessionID         []byte
	cipherSuite       uint16
	compressionMethod uint8
	// serverNameAck is the empty server_name extension acknowledging SNI.
	serverNameAck bool
	alpnProtocol  string
	// secureRenegotiation is an empty renegotiation_info (RFC 5746), sent
	// only to GM-capable TLS clients.
	secureRenegotiation bool
	// ocspStapling is the empty status_request extension that announces
	// a CertificateStatus message.
	ocspStapling bool
	// extensionTypes lists every extension seen, in order.
	extensionTypes []uint16
}

func (m *serverHelloMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	raw, err := m.appendTo(make([]byte, 0, 4+80))
	m.raw = raw
	return raw, err
}

func (m *serverHelloMsg) appendTo(b []byte) ([]byte, error) {
	if m.raw != nil {
		return append(b, m.raw...), nil
	}
	w := appendMessage(b, typeServerHello)
	w.u16(m.vers)
	w.raw(m.random)
	w.vec(1, m.sessionID)
	w.u16(m.cipherSuite)
	w.u8(m.compressionMethod)
	if m.serverNameAck || m.alpnProtocol != "" || m.secureRenegotiation || m.ocspStapling {
		exts := w.open(2)
		if m.secureRenegotiation {
			w.u16(extensionRenegotiationInfo)
			w.u16(1)
			w.u8(0) // renegotiated_connection, empty
		}
		if m.serverNameAck {
			w.u16(extensionServerName)
			w.u16(0)
		}
		if m.alpnProtocol != "" {
			w.u16(extensionALPN)
			ext := w.open(2)
			addALPNList(w, []string{m.alpnProtocol})
			w.close(ext, 2)
		}
		if m.ocspStapling {
			w.u16(extensionStatusRequest)
			w.u16(0)
		}
		w.close(exts, 2)
	}
	return w.finish()
}

func (m *serverHelloMsg) unmarshal(data []byte) bool {
	*m = serverHelloMsg{raw: data}
	s, ok := readBody(data, typeServerHello)
	if !ok {
		return false
	}
	if !s.ReadUint16(&m.vers) || !s.ReadBytes(&m.random, 32) ||
		!readUint8Bytes(&s, &m.sessionID) || len(m.sessionID) > 32 ||
		!s.ReadUint16(&m.cipherSuite) || !s.ReadUint8(&m.compressionMethod) {
		return false
	}
	if s.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return false
	}
	var seen extensionSet
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) {
			return false
		}
		if len(m.extensionTypes) == maxHelloExtensions || !seen.add(typ) {
			return false
		}
		m.extensionTypes = append(m.extensionTypes, typ)
		switch typ {
		case extensionServerName:
			if !ext.Empty() {
				return false
			}
			m.serverNameAck = true
		case extensionALPN:
			protos, ok := readALPNList(&ext)
			if !ok || len(protos) != 1 || !ext.Empty() {
				return false
			}
			m.alpnProtocol = protos[0]
		case extensionRenegotiationInfo:
			var conn cryptobyte.String
			if !ext.ReadUint8LengthPrefixed(&conn) || !conn.Empty() || !ext.Empty() {
				return false // only an initial handshake's is valid
			}
			m.secureRenegotiation = true
		case extensionStatusRequest:
			if !ext.Empty() {
				return false
			}
			m.ocspStapling = true
		}
	}
	return true
}

// certificateMsg carries a certificate list: for TLCP servers the signing
// certificate, the encryption certificate, then the chain.
type certificateMsg struct {
	raw          []byte
	certificates [][]byte
}

func (m *certificateMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	size := 3
	for _, c := range m.certificates {
		size += 3 + len(c)
	}
	raw, err := m.appendTo(make([]byte, 0, 4+size))
	m.raw = raw
	return raw, err
}

func (m *certificateMsg) appendTo(b []byte) ([]byte, error) {
	if m.raw != nil {
		return append(b, m.raw...), nil
	}
	w := appendMessage(b, typeCertificate)
	list := w.open(3)
	for _, c := range m.certificates {
		w.vec(3, c)
	}
	w.close(list, 3)
	return w.finish()
}

func (m *certificateMsg) unmarshal(data []byte) bool {
	*m = certificateMsg{raw: data}
	s, ok := readBody(data, typeCertificate)
	if !ok {
		return false
	}
	var list cryptobyte.String
	if !s.ReadUint24LengthPrefixed(&list) || !s.Empty() {
		return false
	}
	for !list.Empty() {
		var cert cryptobyte.String
		if !list.ReadUint24LengthPrefixed(&cert) || cert.Empty() {
			return false
		}
		m.certificates = append(m.certificates, cert)
	}
	return true
}

// serverKeyExchangeMsg keeps its body raw: its layout depends on the suite
// (see parseServerKeyExchange).
type serverKeyExchangeMsg struct {
	raw []byte
	key []byte
}

func (m *serverKeyExchangeMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	raw, err := m.appendTo(make([]byte, 0, 4+len(m.key)))
	m.raw = raw
	return raw, err
}

func (m *serverKeyExchangeMsg) appendTo(b []byte) ([]byte, error) {
	if m.raw != nil {
		return append(b, m.raw...), nil
	}
	w := appendMessage(b, typeServerKeyExchange)
	w.raw(m.key)
	return w.finish()
}

func (m *serverKeyExchangeMsg) unmarshal(data []byte) bool {
	*m = serverKeyExchangeMsg{raw: data}
	s, ok := readBody(data, typeServerKeyExchange)
	if !ok || s.Empty() {
		return false
	}
	m.key = s
	return true
}

type certificateRequestMsg struct {
	raw                    []byte
	certificateTypes       []byte
	certificateAuthorities [][]byte
}

func (m *certificateRequestMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	size := 3 + len(m.certificateTypes)
	for _, ca := range m.certificateAuthorities {
		size += 2 + len(ca)
	}
	w := newMessage(typeCertificateRequest, size)
	w.vec(1, m.certificateTypes)
	cas := w.open(2)
	for _, ca := range m.certificateAuthorities {
		w.vec(2, ca)
	}
	w.close(cas, 2)
	raw, err := w.finish()
	m.raw = raw
	return raw, err
}

func (m *certificateRequestMsg) unmarshal(data []byte) bool {
	*m = certificateRequestMsg{raw: data}
	s, ok := readBody(data, typeCertificateRequest)
	if !ok {
		return false
	}
	var cas cryptobyte.String
	if !readUint8Bytes(&s, &m.certificateTypes) || len(m.certificateTypes) == 0 ||
		!s.ReadUint16LengthPrefixed(&cas) || !s.Empty() {
		return false
	}
	for !cas.Empty() {
		var ca []byte
		if !readUint16Bytes(&cas, &ca) || len(ca) == 0 {
			return false
		}
		m.certificateAuthorities = append(m.certificateAuthorities, ca)
	}
	return true
}

type serverHelloDoneMsg struct{}

func (m *serverHelloDoneMsg) marshal() ([]byte, error) {
	return []byte{typeServerHelloDone, 0, 0, 0}, nil
}

func (m *serverHelloDoneMsg) unmarshal(data []byte) bool {
	return bytes.Equal(data, []byte{typeServerHelloDone, 0, 0, 0})
}

type helloRequestMsg struct{}

func (m *helloRequestMsg) marshal() ([]byte, error) {
	return []byte{typeHelloRequest, 0, 0, 0}, nil
}

func (m *helloRequestMsg) unmarshal(data []byte) bool {
	return bytes.Equal(data, []byte{typeHelloRequest, 0, 0, 0})
}

// clientKeyExchangeMsg keeps its body raw: an SM2 ciphertext with a length
// prefix (ECC) or ClientECDHEParams with or without one (ECDHE).
type clientKeyExchangeMsg struct {
	raw []byte
	key []byte
}

func (m *clientKeyExchangeMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	w := newMessage(typeClientKeyExchange, len(m.key))
	w.raw(m.key)
	raw, err := w.finish()
	m.raw = raw
	return raw, err
}

func (m *clientKeyExchangeMsg) unmarshal(data []byte) bool {
	*m = clientKeyExchangeMsg{raw: data}
	s, ok := readBody(data, typeClientKeyExchange)
	if !ok || s.Empty() {
		return false
	}
	m.key = s
	return true
}

type certificateVerifyMsg struct {
	raw       []byte
	signature []byte
}

func (m *certificateVerifyMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	w := newMessage(typeCertificateVerify, 2+len(m.signature))
	w.vec(2, m.signature)
	raw, err := w.finish()
	m.raw = raw
	return raw, err
}

func (m *certificateVerifyMsg) unmarshal(data []byte) bool {
	*m = certificateVerifyMsg{raw: data}
	s, ok := readBody(data, typeCertificateVerify)
	if !ok {
		return false
	}
	return readUint16Bytes(&s, &m.signature) && len(m.signature) > 0 && s.Empty()
}

type finishedMsg struct {
	raw        []byte
	verifyData []byte
}

func (m *finishedMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	raw, err := m.appendTo(make([]byte, 0, 4+len(m.verifyData)))
	m.raw = raw
	return raw, err
}

func (m *finishedMsg) appendTo(b []byte) ([]byte, error) {
	if m.raw != nil {
		return append(b, m.raw...), nil
	}
	w := appendMessage(b, typeFinished)
	w.raw(m.verifyData)
	return w.finish()
}

func (m *finishedMsg) unmarshal(data []byte) bool {
	*m = finishedMsg{raw: data}
	s, ok := readBody(data, typeFinished)
	if !ok || len(s) != finishedVerifyLen {
		return false
	}
	m.verifyData = s
	return true
}

// newHandshakeMessage returns an empty message of the given type, or nil.
func newHandshakeMessage(typ uint8) handshakeMessage {
	switch typ {
	case typeHelloRequest:
		return new(helloRequestMsg)
	case typeClientHello:
		return new(clientHelloMsg)
	case typeServerHello:
		return new(serverHelloMsg)
	case typeCertificate:
		return new(certificateMsg)
	case typeServerKeyExchange:
		return new(serverKeyExchangeMsg)
	case typeCertificateRequest:
		return new(certificateRequestMsg)
	case typeServerHelloDone:
		return new(serverHelloDoneMsg)
	case typeCertificateVerify:
		return new(certificateVerifyMsg)
	case typeClientKeyExchange:
		return new(clientKeyExchangeMsg)
	case typeFinished:
		return new(finishedMsg)
	case typeCertificateStatus:
		return new(certificateStatusMsg)
	}
	return nil
}

package tlcp

import (
	"bytes"
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

// marshalMessage frames a body built by f as a handshake message.
func marshalMessage(typ uint8, f func(b *cryptobyte.Builder)) ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(typ)
	b.AddUint24LengthPrefixed(f)
	return b.Bytes()
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
	// extensionTypes lists every extension seen, in order.
	extensionTypes []uint16
}

func (m *clientHelloMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	raw, err := marshalMessage(typeClientHello, func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionID) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, s := range m.cipherSuites {
				b.AddUint16(s)
			}
		})
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.compressionMethods) })
		if m.serverName == "" && len(m.alpnProtocols) == 0 && !m.hasExtensions {
			return
		}
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverName != "" {
				b.AddUint16(extensionServerName)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						b.AddUint8(0) // host_name
						b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(m.serverName)) })
					})
				})
			}
			if len(m.alpnProtocols) > 0 {
				b.AddUint16(extensionALPN)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { addALPNList(b, m.alpnProtocols) })
			}
		})
	})
	m.raw = raw
	return raw, err
}

func addALPNList(b *cryptobyte.Builder, protos []string) {
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, p := range protos {
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
		}
	})
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
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) {
			return false
		}
		if slices.Contains(m.extensionTypes, typ) {
			return false // duplicate extension
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
				if m.serverName != "" {
					return false // two host names
				}
				m.serverName = string(name)
				// A trailing dot is allowed in DNS but not in SNI.
				if m.serverName[len(m.serverName)-1] == '.' {
					return false
				}
			}
		case extensionALPN:
			protos, ok := readALPNList(&ext)
			if !ok || len(protos) == 0 || !ext.Empty() {
				return false
			}
			m.alpnProtocols = protos
		}
	}
	return true
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
	// extensionTypes lists every extension seen, in order.
	extensionTypes []uint16
}

func (m *serverHelloMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	raw, err := marshalMessage(typeServerHello, func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionID) })
		b.AddUint16(m.cipherSuite)
		b.AddUint8(m.compressionMethod)
		if !m.serverNameAck && m.alpnProtocol == "" {
			return
		}
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverNameAck {
				b.AddUint16(extensionServerName)
				b.AddUint16(0)
			}
			if m.alpnProtocol != "" {
				b.AddUint16(extensionALPN)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { addALPNList(b, []string{m.alpnProtocol}) })
			}
		})
	})
	m.raw = raw
	return raw, err
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
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) {
			return false
		}
		if slices.Contains(m.extensionTypes, typ) {
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
	raw, err := marshalMessage(typeCertificate, func(b *cryptobyte.Builder) {
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, c := range m.certificates {
				b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
			}
		})
	})
	m.raw = raw
	return raw, err
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
	raw, err := marshalMessage(typeServerKeyExchange, func(b *cryptobyte.Builder) { b.AddBytes(m.key) })
	m.raw = raw
	return raw, err
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
	raw, err := marshalMessage(typeCertificateRequest, func(b *cryptobyte.Builder) {
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.certificateTypes) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, ca := range m.certificateAuthorities {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(ca) })
			}
		})
	})
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
	raw, err := marshalMessage(typeClientKeyExchange, func(b *cryptobyte.Builder) { b.AddBytes(m.key) })
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
	raw, err := marshalMessage(typeCertificateVerify, func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.signature) })
	})
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
	raw, err := marshalMessage(typeFinished, func(b *cryptobyte.Builder) { b.AddBytes(m.verifyData) })
	m.raw = raw
	return raw, err
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
	}
	return nil
}

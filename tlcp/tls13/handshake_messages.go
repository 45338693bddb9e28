package tls13

// Every handshake message's encoding and decoding, side by side: one file,
// longer than most, so that a field's wire form is checked against the
// same message's other direction and against the fuzz targets beside it.

import (
	"golang.org/x/crypto/cryptobyte"
)

// Handshake message types (RFC 8446 §4).
const (
	typeClientHello         uint8 = 1
	typeServerHello         uint8 = 2
	typeNewSessionTicket    uint8 = 4
	typeEndOfEarlyData      uint8 = 5
	typeEncryptedExtensions uint8 = 8
	typeCertificate         uint8 = 11
	typeCertificateRequest  uint8 = 13
	typeCertificateVerify   uint8 = 15
	typeFinished            uint8 = 20
	typeKeyUpdate           uint8 = 24
	typeMessageHash         uint8 = 254
)

// Extensions (RFC 8446 §4.2, RFC 6066, RFC 7301).
const (
	extServerName          uint16 = 0
	extSupportedGroups     uint16 = 10
	extSignatureAlgorithms uint16 = 13
	extALPN                uint16 = 16
	extPreSharedKey        uint16 = 41
	extEarlyData           uint16 = 42
	extSupportedVersions   uint16 = 43
	extCookie              uint16 = 44
	extPSKModes            uint16 = 45
	extCertAuthorities     uint16 = 47
	extPostHandshakeAuth   uint16 = 49
	extSignatureAlgsCert   uint16 = 50
	extKeyShare            uint16 = 51
)

// pskModeDHE is psk_dhe_ke, the only PSK mode this package uses: a resumed
// handshake still runs a fresh key exchange (forward secrecy).
const pskModeDHE uint8 = 1

// Bounds on what a peer may make a parser keep. A handshake message is at
// most maxHandshake bytes, which bounds every list; these bound the work
// done per element.
const (
	maxKeyShares    = 16
	maxPSKIdentites = 8
	maxALPNProtos   = 32
	maxCertificates = 16
)

type keyShare struct {
	group CurveID
	data  []byte
}

type pskIdentity struct {
	label []byte
	age   uint32
}

// clientHelloMsg is a ClientHello (RFC 8446 §4.1.2).
type clientHelloMsg struct {
	raw                 []byte
	vers                uint16
	random              []byte
	sessionID           []byte
	cipherSuites        []uint16
	compressionMethods  []uint8
	serverName          string
	supportedVersions   []uint16
	supportedGroups     []CurveID
	signatureAlgorithms []uint16
	sigAlgsCert         []uint16
	keyShares           []keyShare
	hasKeyShare         bool
	alpnProtocols       []string
	pskModes            []uint8
	pskIdentities       []pskIdentity
	pskBinders          [][]byte
	cookie              []byte
	earlyData           bool
	hasSigAlgs          bool
	hasGroups           bool
}

func addUint16List(b *cryptobyte.Builder, list []uint16) {
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, v := range list {
			b.AddUint16(v)
		}
	})
}

func (m *clientHelloMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeClientHello)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionID) })
		addUint16List(b, m.cipherSuites)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.compressionMethods) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverName != "" {
				b.AddUint16(extServerName)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						b.AddUint8(0) // host_name
						b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(m.serverName)) })
					})
				})
			}
			if len(m.supportedGroups) > 0 {
				b.AddUint16(extSupportedGroups)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, g := range m.supportedGroups {
							b.AddUint16(uint16(g))
						}
					})
				})
			}
			if len(m.signatureAlgorithms) > 0 {
				b.AddUint16(extSignatureAlgorithms)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { addUint16List(b, m.signatureAlgorithms) })
			}
			if len(m.sigAlgsCert) > 0 {
				b.AddUint16(extSignatureAlgsCert)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { addUint16List(b, m.sigAlgsCert) })
			}
			if len(m.alpnProtocols) > 0 {
				b.AddUint16(extALPN)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, p := range m.alpnProtocols {
							b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
						}
					})
				})
			}
			if len(m.supportedVersions) > 0 {
				b.AddUint16(extSupportedVersions)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, v := range m.supportedVersions {
							b.AddUint16(v)
						}
					})
				})
			}
			if len(m.cookie) > 0 {
				b.AddUint16(extCookie)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.cookie) })
				})
			}
			if m.hasKeyShare {
				b.AddUint16(extKeyShare)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, ks := range m.keyShares {
							b.AddUint16(uint16(ks.group))
							b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(ks.data) })
						}
					})
				})
			}
			if len(m.pskModes) > 0 {
				b.AddUint16(extPSKModes)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.pskModes) })
				})
			}
			if m.earlyData {
				b.AddUint16(extEarlyData)
				b.AddUint16(0)
			}
			// pre_shared_key comes last (RFC 8446 §4.2.11).
			if len(m.pskIdentities) > 0 {
				b.AddUint16(extPreSharedKey)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, id := range m.pskIdentities {
							b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(id.label) })
							b.AddUint32(id.age)
						}
					})
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, binder := range m.pskBinders {
							b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(binder) })
						}
					})
				})
			}
		})
	})
	m.raw = b.BytesOrPanic()
	return m.raw
}

// bindersLen is the length of the binders list at the end of a marshaled
// ClientHello, with its length prefix.
func (m *clientHelloMsg) bindersLen() int {
	n := 2
	for _, b := range m.pskBinders {
		n += 1 + len(b)
	}
	return n
}

func readUint16List(s *cryptobyte.String, out *[]uint16) bool {
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || list.Empty() || len(list)%2 != 0 {
		return false
	}
	for !list.Empty() {
		var v uint16
		if !list.ReadUint16(&v) {
			return false
		}
		*out = append(*out, v)
	}
	return true
}

func (m *clientHelloMsg) unmarshal(data []byte) bool {
	*m = clientHelloMsg{raw: data}
	s := cryptobyte.String(data)
	var typ uint8
	var body cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeClientHello || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() {
		return false
	}
	var suites cryptobyte.String
	if !body.ReadUint16(&m.vers) || !body.ReadBytes(&m.random, 32) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.sessionID)) || len(m.sessionID) > 32 ||
		!body.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 || suites.Empty() ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.compressionMethods)) || len(m.compressionMethods) == 0 {
		return false
	}
	for !suites.Empty() {
		var v uint16
		suites.ReadUint16(&v)
		m.cipherSuites = append(m.cipherSuites, v)
	}
	if body.Empty() {
		// A hello without extensions: legal, but never TLS 1.3.
		return true
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	seen := make(map[uint16]bool)
	for !exts.Empty() {
		var ext uint16
		var e cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&e) {
			return false
		}
		if seen[ext] {
			return false
		}
		seen[ext] = true
		switch ext {
		case extServerName:
			var names cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&names) || names.Empty() {
				return false
			}
			for !names.Empty() {
				var nameType uint8
				var name cryptobyte.String
				if !names.ReadUint8(&nameType) || !names.ReadUint16LengthPrefixed(&name) || name.Empty() {
					return false
				}
				if nameType != 0 {
					continue
				}
				if m.serverName != "" {
					return false // two host names
				}
				m.serverName = string(name)
			}
		case extSupportedGroups:
			var groups []uint16
			if !readUint16List(&e, &groups) {
				return false
			}
			for _, g := range groups {
				m.supportedGroups = append(m.supportedGroups, CurveID(g))
			}
			m.hasGroups = true
		case extSignatureAlgorithms:
			if !readUint16List(&e, &m.signatureAlgorithms) {
				return false
			}
			m.hasSigAlgs = true
		case extSignatureAlgsCert:
			if !readUint16List(&e, &m.sigAlgsCert) {
				return false
			}
		case extALPN:
			var protos cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&protos) || protos.Empty() {
				return false
			}
			for !protos.Empty() {
				var p cryptobyte.String
				if !protos.ReadUint8LengthPrefixed(&p) || p.Empty() || len(m.alpnProtocols) == maxALPNProtos {
					return false
				}
				m.alpnProtocols = append(m.alpnProtocols, string(p))
			}
		case extSupportedVersions:
			var vers cryptobyte.String
			if !e.ReadUint8LengthPrefixed(&vers) || vers.Empty() || len(vers)%2 != 0 {
				return false
			}
			for !vers.Empty() {
				var v uint16
				vers.ReadUint16(&v)
				m.supportedVersions = append(m.supportedVersions, v)
			}
		case extCookie:
			if !e.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.cookie)) || len(m.cookie) == 0 {
				return false
			}
		case extKeyShare:
			var shares cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&shares) {
				return false
			}
			m.hasKeyShare = true
			for !shares.Empty() {
				var ks keyShare
				var g uint16
				if !shares.ReadUint16(&g) || !shares.ReadUint16LengthPrefixed((*cryptobyte.String)(&ks.data)) ||
					len(ks.data) == 0 || len(m.keyShares) == maxKeyShares {
					return false
				}
				ks.group = CurveID(g)
				m.keyShares = append(m.keyShares, ks)
			}
		case extPSKModes:
			if !e.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.pskModes)) || len(m.pskModes) == 0 {
				return false
			}
		case extEarlyData:
			m.earlyData = true
		case extPreSharedKey:
			if !exts.Empty() {
				return false // must be the last extension
			}
			var ids, binders cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&ids) || ids.Empty() {
				return false
			}
			for !ids.Empty() {
				var id pskIdentity
				if !ids.ReadUint16LengthPrefixed((*cryptobyte.String)(&id.label)) || len(id.label) == 0 ||
					!ids.ReadUint32(&id.age) || len(m.pskIdentities) == maxPSKIdentites {
					return false
				}
				m.pskIdentities = append(m.pskIdentities, id)
			}
			if !e.ReadUint16LengthPrefixed(&binders) || binders.Empty() {
				return false
			}
			for !binders.Empty() {
				var binder []byte
				if !binders.ReadUint8LengthPrefixed((*cryptobyte.String)(&binder)) || len(binder) < 32 {
					return false
				}
				m.pskBinders = append(m.pskBinders, binder)
			}
			if len(m.pskBinders) != len(m.pskIdentities) {
				return false
			}
		default:
			continue // unknown extensions are ignored
		}
		if !e.Empty() {
			return false
		}
	}
	return true
}

// serverHelloMsg is a ServerHello or a HelloRetryRequest (RFC 8446 §4.1.3).
type serverHelloMsg struct {
	raw               []byte
	vers              uint16
	random            []byte
	sessionID         []byte
	cipherSuite       uint16
	compressionMethod uint8
	supportedVersion  uint16
	serverShare       keyShare
	selectedIdentity  uint16
	hasPSK            bool
	selectedGroup     CurveID // HelloRetryRequest only
	cookie            []byte  // HelloRetryRequest only
}

func (m *serverHelloMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeServerHello)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionID) })
		b.AddUint16(m.cipherSuite)
		b.AddUint8(m.compressionMethod)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.supportedVersion != 0 {
				b.AddUint16(extSupportedVersions)
				b.AddUint16(2)
				b.AddUint16(m.supportedVersion)
			}
			if m.serverShare.group != 0 {
				b.AddUint16(extKeyShare)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16(uint16(m.serverShare.group))
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.serverShare.data) })
				})
			}
			if m.selectedGroup != 0 {
				b.AddUint16(extKeyShare)
				b.AddUint16(2)
				b.AddUint16(uint16(m.selectedGroup))
			}
			if len(m.cookie) > 0 {
				b.AddUint16(extCookie)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.cookie) })
				})
			}
			if m.hasPSK {
				b.AddUint16(extPreSharedKey)
				b.AddUint16(2)
				b.AddUint16(m.selectedIdentity)
			}
		})
	})
	m.raw = b.BytesOrPanic()
	return m.raw
}

func (m *serverHelloMsg) unmarshal(data []byte) bool {
	*m = serverHelloMsg{raw: data}
	s := cryptobyte.String(data)
	var typ uint8
	var body cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeServerHello || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() {
		return false
	}
	if !body.ReadUint16(&m.vers) || !body.ReadBytes(&m.random, 32) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.sessionID)) || len(m.sessionID) > 32 ||
		!body.ReadUint16(&m.cipherSuite) || !body.ReadUint8(&m.compressionMethod) {
		return false
	}
	if body.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	hrr := isHelloRetryRequest(m.random)
	seen := make(map[uint16]bool)
	for !exts.Empty() {
		var ext uint16
		var e cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&e) || seen[ext] {
			return false
		}
		seen[ext] = true
		switch ext {
		case extSupportedVersions:
			if !e.ReadUint16(&m.supportedVersion) {
				return false
			}
		case extKeyShare:
			var g uint16
			if !e.ReadUint16(&g) {
				return false
			}
			if hrr && e.Empty() {
				m.selectedGroup = CurveID(g)
				break
			}
			m.serverShare.group = CurveID(g)
			if !e.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.serverShare.data)) || len(m.serverShare.data) == 0 {
				return false
			}
		case extCookie:
			if !e.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.cookie)) || len(m.cookie) == 0 {
				return false
			}
		case extPreSharedKey:
			m.hasPSK = true
			if !e.ReadUint16(&m.selectedIdentity) {
				return false
			}
		default:
			return false // a server sends only what was asked for
		}
		if !e.Empty() {
			return false
		}
	}
	return true
}

// encryptedExtensionsMsg is EncryptedExtensions (RFC 8446 §4.3.1).
type encryptedExtensionsMsg struct {
	alpnProtocol  string
	serverNameAck bool
	earlyData     bool
}

func (m *encryptedExtensionsMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeEncryptedExtensions)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverNameAck {
				b.AddUint16(extServerName)
				b.AddUint16(0)
			}
			if m.alpnProtocol != "" {
				b.AddUint16(extALPN)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(m.alpnProtocol)) })
					})
				})
			}
		})
	})
	return b.BytesOrPanic()
}

func (m *encryptedExtensionsMsg) unmarshal(data []byte) bool {
	*m = encryptedExtensionsMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	var body, exts cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeEncryptedExtensions || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() ||
		!body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	seen := make(map[uint16]bool)
	for !exts.Empty() {
		var ext uint16
		var e cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&e) || seen[ext] {
			return false
		}
		seen[ext] = true
		switch ext {
		case extServerName:
			m.serverNameAck = true
		case extALPN:
			var protos, p cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&protos) || !protos.ReadUint8LengthPrefixed(&p) || p.Empty() || !protos.Empty() {
				return false
			}
			m.alpnProtocol = string(p)
		case extEarlyData:
			m.earlyData = true
		default:
			// Extensions such as supported_groups or max_fragment_length
			// carry nothing this client acts on.
			continue
		}
		if !e.Empty() {
			return false
		}
	}
	return true
}

// certificateRequestMsg is CertificateRequest (RFC 8446 §4.3.2).
type certificateRequestMsg struct {
	context                []byte
	signatureAlgorithms    []uint16
	certificateAuthorities [][]byte
}

func (m *certificateRequestMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeCertificateRequest)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.context) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint16(extSignatureAlgorithms)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { addUint16List(b, m.signatureAlgorithms) })
			if len(m.certificateAuthorities) > 0 {
				b.AddUint16(extCertAuthorities)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, ca := range m.certificateAuthorities {
							b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(ca) })
						}
					})
				})
			}
		})
	})
	return b.BytesOrPanic()
}

func (m *certificateRequestMsg) unmarshal(data []byte) bool {
	*m = certificateRequestMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	var body, exts cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeCertificateRequest || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.context)) ||
		!body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	seen := make(map[uint16]bool)
	for !exts.Empty() {
		var ext uint16
		var e cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&e) || seen[ext] {
			return false
		}
		seen[ext] = true
		switch ext {
		case extSignatureAlgorithms:
			if !readUint16List(&e, &m.signatureAlgorithms) {
				return false
			}
		case extCertAuthorities:
			var cas cryptobyte.String
			if !e.ReadUint16LengthPrefixed(&cas) || cas.Empty() {
				return false
			}
			for !cas.Empty() {
				var ca []byte
				if !cas.ReadUint16LengthPrefixed((*cryptobyte.String)(&ca)) || len(ca) == 0 {
					return false
				}
				m.certificateAuthorities = append(m.certificateAuthorities, ca)
			}
		default:
			continue
		}
		if !e.Empty() {
			return false
		}
	}
	// signature_algorithms is mandatory (RFC 8446 §4.3.2).
	return seen[extSignatureAlgorithms]
}

// certificateMsg is Certificate (RFC 8446 §4.4.2); entry extensions are
// neither sent nor kept.
type certificateMsg struct {
	context      []byte
	certificates [][]byte
}

func (m *certificateMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeCertificate)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.context) })
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, c := range m.certificates {
				b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
				b.AddUint16(0)
			}
		})
	})
	return b.BytesOrPanic()
}

func (m *certificateMsg) unmarshal(data []byte) bool {
	*m = certificateMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	var body, list cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeCertificate || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.context)) ||
		!body.ReadUint24LengthPrefixed(&list) || !body.Empty() {
		return false
	}
	for !list.Empty() {
		var cert []byte
		var exts cryptobyte.String
		if !list.ReadUint24LengthPrefixed((*cryptobyte.String)(&cert)) || len(cert) == 0 ||
			!list.ReadUint16LengthPrefixed(&exts) || len(m.certificates) == maxCertificates {
			return false
		}
		m.certificates = append(m.certificates, cert)
	}
	return true
}

// certificateVerifyMsg is CertificateVerify (RFC 8446 §4.4.3).
type certificateVerifyMsg struct {
	scheme    uint16
	signature []byte
}

func (m *certificateVerifyMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeCertificateVerify)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(m.scheme)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.signature) })
	})
	return b.BytesOrPanic()
}

func (m *certificateVerifyMsg) unmarshal(data []byte) bool {
	*m = certificateVerifyMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	var body cryptobyte.String
	return s.ReadUint8(&typ) && typ == typeCertificateVerify && s.ReadUint24LengthPrefixed(&body) && s.Empty() &&
		body.ReadUint16(&m.scheme) && body.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.signature)) &&
		len(m.signature) > 0 && body.Empty()
}

// finishedMsg is Finished (RFC 8446 §4.4.4).
type finishedMsg struct {
	verifyData []byte
}

func (m *finishedMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeFinished)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.verifyData) })
	return b.BytesOrPanic()
}

func (m *finishedMsg) unmarshal(data []byte) bool {
	*m = finishedMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	return s.ReadUint8(&typ) && typ == typeFinished &&
		s.ReadUint24LengthPrefixed((*cryptobyte.String)(&m.verifyData)) && s.Empty() && len(m.verifyData) == hashLen
}

// newSessionTicketMsg is NewSessionTicket (RFC 8446 §4.6.1).
type newSessionTicketMsg struct {
	lifetime     uint32
	ageAdd       uint32
	nonce        []byte
	label        []byte
	maxEarlyData uint32
}

func (m *newSessionTicketMsg) marshal() []byte {
	var b cryptobyte.Builder
	b.AddUint8(typeNewSessionTicket)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint32(m.lifetime)
		b.AddUint32(m.ageAdd)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.nonce) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.label) })
		b.AddUint16(0) // no extensions: no early data
	})
	return b.BytesOrPanic()
}

func (m *newSessionTicketMsg) unmarshal(data []byte) bool {
	*m = newSessionTicketMsg{}
	s := cryptobyte.String(data)
	var typ uint8
	var body, exts cryptobyte.String
	if !s.ReadUint8(&typ) || typ != typeNewSessionTicket || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() ||
		!body.ReadUint32(&m.lifetime) || !body.ReadUint32(&m.ageAdd) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.nonce)) ||
		!body.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.label)) || len(m.label) == 0 ||
		!body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	for !exts.Empty() {
		var ext uint16
		var e cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&e) {
			return false
		}
		if ext == extEarlyData && !e.ReadUint32(&m.maxEarlyData) {
			return false
		}
	}
	return true
}

// keyUpdateMsg is KeyUpdate (RFC 8446 §4.6.3).
type keyUpdateMsg struct {
	updateRequested bool
}

func (m *keyUpdateMsg) marshal() []byte {
	req := uint8(0)
	if m.updateRequested {
		req = 1
	}
	return []byte{typeKeyUpdate, 0, 0, 1, req}
}

func (m *keyUpdateMsg) unmarshal(data []byte) bool {
	if len(data) != 5 || data[0] != typeKeyUpdate || data[1] != 0 || data[2] != 0 || data[3] != 1 || data[4] > 1 {
		return false
	}
	m.updateRequested = data[4] == 1
	return true
}

package tls13

import "slices"

// ParseClientHello parses a ClientHello handshake message (type byte
// first, as it arrives in the first records of a connection) into the
// lists an edge decides on. It reports false for anything that is not a
// well-formed ClientHello. The edge can peek the first records, call
// this, and route the connection here or to crypto/tls before either
// consumes a byte.
func ParseClientHello(msg []byte) (*ClientHelloInfo, bool) {
	var ch clientHelloMsg
	if !ch.unmarshal(msg) {
		return nil, false
	}
	return &ClientHelloInfo{
		CipherSuites:      ch.cipherSuites,
		ServerName:        ch.serverName,
		SupportedProtos:   ch.alpnProtocols,
		SupportedGroups:   ch.supportedGroups,
		SignatureSchemes:  ch.signatureAlgorithms,
		SupportedVersions: ch.supportedVersions,
	}, true
}

// OffersShangMi reports whether a ClientHello is one this package can
// serve: it offers TLS 1.3, a ShangMi suite (TLS_SM4_GCM_SM3 or
// TLS_SM4_CCM_SM3), the sm2sig_sm3 signature scheme, and curveSM2 or
// curveSM2MLKEM768. A hello that lacks any of them is not ours: the edge
// hands it to crypto/tls. The fields are those of ClientHelloInfo, which
// ParseClientHello fills (crypto/tls's ClientHelloInfo has the same
// lists, as []uint16 and []tls.CurveID).
func OffersShangMi(info *ClientHelloInfo) bool {
	if info == nil || !slices.Contains(info.SupportedVersions, VersionTLS13) ||
		!slices.Contains(info.SignatureSchemes, SM2SigSM3) {
		return false
	}
	suite := slices.ContainsFunc(info.CipherSuites, func(id uint16) bool { return cipherSuiteByID(id) != nil })
	group := slices.ContainsFunc(info.SupportedGroups, supportedGroup)
	return suite && group
}

// OffersOnlyShangMi reports whether a ShangMi hello offers no other
// TLS 1.3 suite, so that crypto/tls could not serve it at all; with
// both on offer, the site's preference decides.
func OffersOnlyShangMi(info *ClientHelloInfo) bool {
	if !OffersShangMi(info) {
		return false
	}
	for _, id := range info.CipherSuites {
		// TLS 1.3 suites of crypto/tls: TLS_AES_128_GCM_SHA256,
		// TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256.
		if id == 0x1301 || id == 0x1302 || id == 0x1303 {
			return false
		}
	}
	return true
}

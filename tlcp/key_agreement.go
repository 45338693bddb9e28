package tlcp

import (
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/crypto/cryptobyte"
)

const (
	preMasterSecretLength = 48
	// curveSM2 is the named_curve value for sm2p256v1 (GM/T 0024-2023).
	curveSM2          = 0x0029
	curveTypeNamed    = 3
	ecdheParamsLength = 4 + 65 // curve_type, named_curve, vec8 point
)

// signMessage signs msg with the SM2 signing key as TLCP needs it: the
// signer computes e = SM3(Z || msg) with the default user ID.
func signMessage(key crypto.PrivateKey, rand io.Reader, msg []byte) ([]byte, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("signing key of type %T is not a crypto.Signer", key)
	}
	return signer.Sign(rand, msg, sm2.DefaultSM2SignerOpts)
}

// verifyMessage checks an SM2 signature over msg with the default user ID.
func verifyMessage(pub *ecdsa.PublicKey, msg, sig []byte) bool {
	return sm2.VerifyASN1WithSM2(pub, nil, msg, sig)
}

// eccSignedParams appends to dst what the ECC ServerKeyExchange signs:
// client_random || server_random || u24 length || encryption certificate.
func eccSignedParams(dst, clientRandom, serverRandom, encCert []byte) []byte {
	msg := slices.Grow(dst, 64+3+len(encCert))
	msg = append(msg, clientRandom...)
	msg = append(msg, serverRandom...)
	msg = append(msg, byte(len(encCert)>>16), byte(len(encCert)>>8), byte(len(encCert)))
	return append(msg, encCert...)
}

// ecdheSignedParams appends to dst what the ECDHE ServerKeyExchange
// signs.
func ecdheSignedParams(dst, clientRandom, serverRandom, params []byte) []byte {
	msg := slices.Grow(dst, 64+len(params))
	msg = append(msg, clientRandom...)
	msg = append(msg, serverRandom...)
	return append(msg, params...)
}

// marshalECDHEParams encodes ServerECDHEParams / ClientECDHEParams.
func marshalECDHEParams(point []byte) []byte {
	out := make([]byte, 0, 4+len(point))
	out = append(out, curveTypeNamed, curveSM2>>8, curveSM2&0xff, byte(len(point)))
	return append(out, point...)
}

// parseECDHEParams reads curve_type, named_curve and the point. The curve
// fields are not checked: TLCP always uses sm2p256v1 and peers disagree on
// what they write there.
func parseECDHEParams(s *cryptobyte.String) (point []byte, ok bool) {
	var curveType uint8
	var curve uint16
	if !s.ReadUint8(&curveType) || !s.ReadUint16(&curve) || !readUint8Bytes(s, &point) || len(point) == 0 {
		return nil, false
	}
	return point, true
}

// parseServerKeyExchange splits an SKE body into the ECDHE parameters
// (nil for ECC suites) and the signature.
func parseServerKeyExchange(body []byte, ecdhe bool) (params, sig []byte, ok bool) {
	s := cryptobyte.String(body)
	if ecdhe {
		start := s
		if _, ok := parseECDHEParams(&s); !ok {
			return nil, nil, false
		}
		params = start[:len(start)-len(s)]
	}
	if !readUint16Bytes(&s, &sig) || len(sig) == 0 || !s.Empty() {
		return nil, nil, false
	}
	return params, sig, true
}

// marshalServerKeyExchange appends the SKE body to dst.
func marshalServerKeyExchange(dst, params, sig []byte) []byte {
	out := slices.Grow(dst, len(params)+2+len(sig))
	out = append(out, params...)
	out = append(out, byte(len(sig)>>8), byte(len(sig)))
	return append(out, sig...)
}

// parseECCClientKeyExchange returns the SM2 ciphertext of an ECC
// ClientKeyExchange (vec16).
func parseECCClientKeyExchange(body []byte) ([]byte, bool) {
	s := cryptobyte.String(body)
	var ct []byte
	if !readUint16Bytes(&s, &ct) || len(ct) == 0 || !s.Empty() {
		return nil, false
	}
	return ct, true
}

// parseECDHEClientKeyExchange accepts ClientECDHEParams both bare (69 bytes,
// the majority) and with a u16 length prefix (71 bytes, GmSSL).
func parseECDHEClientKeyExchange(body []byte) ([]byte, bool) {
	s := cryptobyte.String(body)
	if len(body) > 2 && body[0] == 0 {
		var inner cryptobyte.String
		if !s.ReadUint16LengthPrefixed(&inner) || !s.Empty() {
			return nil, false
		}
		s = inner
	}
	point, ok := parseECDHEParams(&s)
	if !ok || !s.Empty() {
		return nil, false
	}
	return point, true
}

var errNotSM2Key = errors.New("public key is not an SM2 key")

// sm2PublicKey returns pub as an SM2 public key.
func sm2PublicKey(pub any) (*ecdsa.PublicKey, error) {
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || !sm2.IsSM2PublicKey(k) {
		return nil, errNotSM2Key
	}
	return k, nil
}

// sm2KeyExchange computes the 48-byte pre-master secret of the ECDHE
// suites with the SM2 key agreement protocol (GB/T 32918.3), without the
// optional confirmation hashes. The server is the initiator; both sides use
// their encryption keys as the static keys and the default user IDs. The
// KDF input always puts the server's Z first.
//
// ownStaticPub is the public key of our encryption certificate: taking it
// from there spares a scalar multiplication per handshake to recompute it
// from the private key.
func sm2KeyExchange(isServer bool, static KeyAgreementKey, ownStaticPub *ecdsa.PublicKey, ephemeral *ecdh.PrivateKey, peerStatic *ecdsa.PublicKey, peerEphemeral []byte) ([]byte, error) {
	ownStatic, err := static.ECDH()
	if err != nil {
		return nil, err
	}
	ownStaticECDH, err := sm2.PublicKeyToECDH(ownStaticPub)
	if err != nil {
		return nil, err
	}
	peerStaticECDH, err := sm2.PublicKeyToECDH(peerStatic)
	if err != nil {
		return nil, err
	}
	peerEph, err := ecdh.P256().NewPublicKey(peerEphemeral)
	if err != nil {
		return nil, err
	}
	shared, err := ownStatic.SM2MQV(ephemeral, peerStaticECDH, peerEph)
	if err != nil {
		return nil, err
	}
	return shared.SM2SharedKey(!isServer, preMasterSecretLength, ownStaticECDH, peerStaticECDH, nil, nil)
}

// encPublicKey returns the SM2 public key of an identity's encryption
// certificate.
func encPublicKey(cert *Certificate) (*ecdsa.PublicKey, error) {
	leaf := cert.EncLeaf
	if leaf == nil {
		if len(cert.EncCertificate) == 0 {
			return nil, errors.New("no encryption certificate")
		}
		var err error
		if leaf, err = parseCertificate(cert.EncCertificate[0]); err != nil {
			return nil, err
		}
	}
	return leafSM2Key(leaf)
}

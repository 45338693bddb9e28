package accel

import (
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// sm2PlainCiphertext turns an SM2 ciphertext in ASN.1 (GM/T 0009:
// SEQUENCE { x INTEGER, y INTEGER, hash OCTET STRING, ciphertext OCTET
// STRING }, the form TLCP's ClientKeyExchange carries) into the plain
// form 04 || x || y || hash || ciphertext, coordinates in 32 bytes each.
// It reports false for anything else, negative or over-long coordinates
// included, which the caller leaves to gmsm to refuse.
func sm2PlainCiphertext(ct []byte) ([]byte, bool) {
	var inner cryptobyte.String
	var x, y, c3, c2 []byte
	in := cryptobyte.String(ct)
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !in.Empty() ||
		!inner.ReadASN1Integer(&x) || !inner.ReadASN1Integer(&y) ||
		!inner.ReadASN1Bytes(&c3, asn1.OCTET_STRING) ||
		!inner.ReadASN1Bytes(&c2, asn1.OCTET_STRING) || !inner.Empty() {
		return nil, false
	}
	if len(x) > 32 || len(y) > 32 {
		return nil, false
	}
	out := make([]byte, 1+64+len(c3)+len(c2))
	out[0] = 4
	copy(out[1+32-len(x):33], x)
	copy(out[33+32-len(y):65], y)
	copy(out[65:], c3)
	copy(out[65+len(c3):], c2)
	return out, true
}

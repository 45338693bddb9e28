package certs

import (
	"crypto/ecdsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"math/big"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
)

// zaWithID computes Z = SM3(ENTL || ID || a || b || xG || yG || xP || yP)
// for any user ID, including the empty one (gmsm substitutes the default
// ID for an empty one, which is what we need to tell the two apart).
func zaWithID(point []byte, id []byte) []byte {
	params := sm2.P256().Params()
	size := (params.BitSize + 7) / 8
	fixed := func(b []byte) []byte {
		out := make([]byte, size)
		copy(out[size-len(b):], b)
		return out
	}
	a := new(big.Int).Sub(params.P, big.NewInt(3))
	h := sm3.New()
	var entl [2]byte
	binary.BigEndian.PutUint16(entl[:], uint16(len(id)*8))
	h.Write(entl[:])
	h.Write(id)
	h.Write(fixed(a.Bytes()))
	h.Write(fixed(params.B.Bytes()))
	h.Write(fixed(params.Gx.Bytes()))
	h.Write(fixed(params.Gy.Bytes()))
	h.Write(point[1:])
	return h.Sum(nil)
}

// verifySM2WithID checks an SM2 signature over msg with the given user ID.
func verifySM2WithID(pub *ecdsa.PublicKey, id, msg, sig []byte) bool {
	point, ok := uncompressedPoint(pub)
	if !ok {
		return false
	}
	h := sm3.New()
	h.Write(zaWithID(point, id))
	h.Write(msg)
	return sm2.VerifyASN1(pub, h.Sum(nil), sig)
}

// uncompressedPoint returns the 04||X||Y encoding of an SM2 public key.
func uncompressedPoint(pub *ecdsa.PublicKey) ([]byte, bool) {
	if pub == nil || !sm2.IsSM2PublicKey(pub) {
		return nil, false
	}
	der, err := smx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, false
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		Key       asn1.BitString
	}
	if rest, err := asn1.Unmarshal(der, &spki); err != nil || len(rest) > 0 {
		return nil, false
	}
	p := spki.Key.RightAlign()
	if len(p) != 65 || p[0] != 4 {
		return nil, false
	}
	return p, true
}

// defaultSM2ID is the user ID every TLCP implementation signs with.
var defaultSM2ID = []byte("1234567812345678")

// signedWithEmptyID reports whether child's SM2 signature fails with the
// default user ID but verifies with the empty one under parent's key: the
// mark of a certificate signed by OpenSSL 3.0 without
// -sigopt distid:1234567812345678.
func signedWithEmptyID(child, parent *smx509.Certificate) bool {
	if child.SignatureAlgorithm != smx509.SM2WithSM3 {
		return false
	}
	pub, ok := parent.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return false
	}
	return !verifySM2WithID(pub, defaultSM2ID, child.RawTBSCertificate, child.Signature) &&
		verifySM2WithID(pub, nil, child.RawTBSCertificate, child.Signature)
}

// emptyIDAdvice explains how to fix a certificate signed with an empty
// SM2 user ID.
const emptyIDAdvice = "its SM2 signature verifies only with an EMPTY user ID, not with the default ID 1234567812345678 that TLCP peers use: " +
	"it was signed by OpenSSL 3 without -sigopt distid:1234567812345678. Re-sign it with " +
	"'openssl x509 -req ... -sm3 -sigopt distid:1234567812345678 -vfyopt distid:1234567812345678' " +
	"(and 'openssl req ... -sm3 -sigopt distid:1234567812345678' for CSRs and self-signed CAs), or issue it with gmgate cert issue"

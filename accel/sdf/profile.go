package sdf

import (
	"crypto/ecdsa"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// DecryptVariant is the prototype of the vendor extension
// SDF_InternalDecrypt_ECC, which no standard fixes. It cannot be detected:
// calling a library with the wrong one passes garbage or crashes.
type DecryptVariant int

const (
	// DecryptNone: the library has no usable decryption; only signing
	// keys can live on it.
	DecryptNone DecryptVariant = iota
	// DecryptV1 is (hSession, uiISKIndex, uiAlgID, ECCCipher*, pucData,
	// puiDataLength): GmSSL, SoftSDF, Sansec-style and most vendor SDKs.
	DecryptV1
	// DecryptV2 is (hSession, uiISKIndex, ECCCipher*, pucData,
	// puiDataLength), without an algorithm ID: Tongsuo's TSAPI and others.
	DecryptV2
	// DecryptV3 is (hSession, uiAlgID, uiISKIndex, ECCCipher*, pucData,
	// puiDataLength).
	DecryptV3
	// DecryptV4 is (hSession, uiISKIndex, uiAlgID, pucData, puiDataLength,
	// ECCCipher*).
	DecryptV4
)

var decryptNames = map[string]DecryptVariant{"none": DecryptNone, "v1": DecryptV1, "v2": DecryptV2, "v3": DecryptV3, "v4": DecryptV4}

func (v DecryptVariant) String() string {
	for n, x := range decryptNames {
		if x == v {
			return n
		}
	}
	return fmt.Sprintf("DecryptVariant(%d)", int(v))
}

// CipherLayout is the memory layout of the ECCCipher structure.
type CipherLayout int

const (
	// CipherStandard is GM/T 0018-2012's {x, y, M[32], uint L, C[L]}; the
	// variants with a fixed C[136] or GmSSL's extra C_[254] read the same
	// bytes because the buffer handed over is always large enough.
	CipherStandard CipherLayout = iota
	// Cipher2008 is the pre-standard {uint clength, x, y, C[136], M[32]}
	// of older Sansec SDKs.
	Cipher2008
)

var cipherNames = map[string]CipherLayout{"std": CipherStandard, "2008": Cipher2008}

func (c CipherLayout) String() string {
	if c == Cipher2008 {
		return "2008"
	}
	return "std"
}

// AlgIDs are the SM2 algorithm identifiers of GM/T 0006 the library uses.
type AlgIDs struct {
	Name string
	// SM2Sign, SM2Exchange and SM2Encrypt are SGD_SM2_1, SGD_SM2_2 and
	// SGD_SM2_3.
	SM2Sign, SM2Exchange, SM2Encrypt uint32
}

var (
	// AlgIDs2012 is the numbering of GM/T 0006-2012.
	AlgIDs2012 = AlgIDs{"2012", 0x00020200, 0x00020400, 0x00020800}
	// AlgIDsLegacy is the pre-standard numbering still found in Sansec,
	// SKF and GmSSL 2 headers and many vendor SDKs.
	AlgIDsLegacy = AlgIDs{"legacy", 0x00020100, 0x00020200, 0x00020400}
)

// Profile describes how one vendor's library lays out and names things
// where GM/T 0018 leaves room or vendors departed from it.
type Profile struct {
	// Name is the named profile this one started from.
	Name string
	// CoordLen is the width in bytes of each coordinate field in
	// ECCrefPublicKey, ECCSignature and ECCCipher: 64 (GM/T 0018-2012,
	// values right-aligned) or 32 (pre-standard 256-bit headers).
	CoordLen int
	Cipher   CipherLayout
	AlgIDs   AlgIDs
	Decrypt  DecryptVariant
}

// Profiles are the named vendor profiles; a reference picks one with
// profile= and may override single fields.
var Profiles = map[string]Profile{
	"standard":   {Name: "standard", CoordLen: 64, Cipher: CipherStandard, AlgIDs: AlgIDs2012, Decrypt: DecryptV1},
	"tongsuo":    {Name: "tongsuo", CoordLen: 64, Cipher: CipherStandard, AlgIDs: AlgIDs2012, Decrypt: DecryptV2},
	"legacy":     {Name: "legacy", CoordLen: 64, Cipher: CipherStandard, AlgIDs: AlgIDsLegacy, Decrypt: DecryptV1},
	"sansec2008": {Name: "sansec2008", CoordLen: 32, Cipher: Cipher2008, AlgIDs: AlgIDsLegacy, Decrypt: DecryptV1},
}

func profileNames() string {
	names := make([]string, 0, len(Profiles))
	for n := range Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// String describes the profile in the reference's terms.
func (p Profile) String() string {
	return fmt.Sprintf("profile=%s (coord=%d cipher=%s alg-ids=%s decrypt=%s)", p.Name, p.CoordLen, p.Cipher, p.AlgIDs.Name, p.Decrypt)
}

const (
	coordBytes = 32 // SM2 values
	hashLen    = 32 // SM3, the ECCCipher M field
	// maxCipherText is the longest C2 the backend hands to a library:
	// 136 bytes fits every layout (the fixed C[136] ones included) and is
	// far above the 48 bytes of a pre-master secret.
	maxCipherText = 136
	// cipherBufLen is the size of every ECCCipher buffer handed to a
	// library, which some fill or read as a fixed-size structure
	// whatever the length field says.
	cipherBufLen = 512
	// sigBufLen and pubBufLen are the output buffers for ECCSignature and
	// ECCrefPublicKey, larger than either layout.
	sigBufLen = 256
	pubBufLen = 256
)

func (p Profile) pubKeyLen() int    { return 4 + 2*p.CoordLen }
func (p Profile) signatureLen() int { return 2 * p.CoordLen }

// field returns the 32 value bytes of a right-aligned coordinate field,
// checking that the padding in front is zero.
func (p Profile) field(b []byte) ([]byte, bool) {
	pad := p.CoordLen - coordBytes
	for _, c := range b[:pad] {
		if c != 0 {
			return nil, false
		}
	}
	return b[pad:p.CoordLen], true
}

// putField writes a 32-byte value right-aligned into a coordinate field.
func (p Profile) putField(dst, v []byte) {
	copy(dst[p.CoordLen-len(v):p.CoordLen], v)
}

// decodePublicKey reads an ECCrefPublicKey {uint bits; x; y}.
func (p Profile) decodePublicKey(b []byte) (*ecdsa.PublicKey, error) {
	if len(b) < p.pubKeyLen() {
		return nil, errors.New("public key structure too short")
	}
	if bits := binary.NativeEndian.Uint32(b); bits != 256 {
		return nil, fmt.Errorf("public key has bits=%d, want 256", bits)
	}
	x, okx := p.field(b[4:])
	y, oky := p.field(b[4+p.CoordLen:])
	if !okx || !oky {
		return nil, fmt.Errorf("public key coordinates are not right-aligned in %d-byte fields", p.CoordLen)
	}
	point := make([]byte, 0, 65)
	point = append(append(append(point, 4), x...), y...)
	pub, err := sm2.NewPublicKey(point)
	if err != nil {
		return nil, errors.New("public key is not a point on the SM2 curve")
	}
	return pub, nil
}

// sm2N is the order of the SM2 group.
var sm2N = sm2.P256().Params().N

// signatureDER turns an ECCSignature {r; s} into the DER
// SEQUENCE{INTEGER r, INTEGER s} that TLCP carries.
func (p Profile) signatureDER(b []byte) ([]byte, error) {
	if len(b) < p.signatureLen() {
		return nil, errors.New("signature structure too short")
	}
	rb, okr := p.field(b)
	sb, oks := p.field(b[p.CoordLen:])
	if !okr || !oks {
		return nil, fmt.Errorf("signature values are not right-aligned in %d-byte fields", p.CoordLen)
	}
	r, s := new(big.Int).SetBytes(rb), new(big.Int).SetBytes(sb)
	if r.Sign() == 0 || s.Sign() == 0 || r.Cmp(sm2N) >= 0 || s.Cmp(sm2N) >= 0 {
		return nil, errors.New("signature values out of range")
	}
	var bld cryptobyte.Builder
	bld.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1BigInt(r)
		b.AddASN1BigInt(s)
	})
	return bld.Bytes()
}

// sm2Ciphertext is an SM2 ciphertext split into its parts: C1 = (x, y),
// C3 = hash, C2 = the encrypted data.
type sm2Ciphertext struct {
	x, y, hash, c2 []byte
}

// parseCiphertext reads a GM/T 0009 DER ciphertext SEQUENCE{INTEGER x,
// INTEGER y, OCTET STRING hash, OCTET STRING c2} or the uncompressed raw
// form 04||x||y||hash||c2 (C1C3C2). C1 must be a point on the curve, so
// that an invalid-curve point never reaches the device, and C2 must fit
// every ECCCipher layout.
func parseCiphertext(ct []byte) (*sm2Ciphertext, error) {
	var c sm2Ciphertext
	if len(ct) > 0 && ct[0] == 4 {
		if len(ct) <= 1+2*coordBytes+hashLen {
			return nil, errors.New("ciphertext too short")
		}
		c.x, c.y = ct[1:33], ct[33:65]
		c.hash, c.c2 = ct[65:97], ct[97:]
	} else {
		var inner cryptobyte.String
		var x, y big.Int
		in := cryptobyte.String(ct)
		if !in.ReadASN1(&inner, asn1.SEQUENCE) || !in.Empty() ||
			!inner.ReadASN1Integer(&x) || !inner.ReadASN1Integer(&y) ||
			!inner.ReadASN1Bytes(&c.hash, asn1.OCTET_STRING) ||
			!inner.ReadASN1Bytes(&c.c2, asn1.OCTET_STRING) || !inner.Empty() {
			return nil, errors.New("ciphertext is not a GM/T 0009 SM2 ciphertext")
		}
		if x.Sign() < 0 || y.Sign() < 0 || x.BitLen() > 256 || y.BitLen() > 256 {
			return nil, errors.New("ciphertext point coordinates out of range")
		}
		c.x, c.y = x.FillBytes(make([]byte, coordBytes)), y.FillBytes(make([]byte, coordBytes))
	}
	if len(c.hash) != hashLen {
		return nil, errors.New("ciphertext hash is not 32 bytes")
	}
	if len(c.c2) == 0 || len(c.c2) > maxCipherText {
		return nil, fmt.Errorf("ciphertext carries %d bytes; 1 to %d are supported", len(c.c2), maxCipherText)
	}
	point := make([]byte, 0, 65)
	point = append(append(append(point, 4), c.x...), c.y...)
	if _, err := sm2.NewPublicKey(point); err != nil {
		return nil, errors.New("ciphertext point is not on the SM2 curve")
	}
	return &c, nil
}

// encodeCipher lays out an ECCCipher for the library in a zeroed buffer
// of cipherBufLen bytes.
func (p Profile) encodeCipher(c *sm2Ciphertext) []byte {
	buf := make([]byte, cipherBufLen)
	n := p.CoordLen
	switch p.Cipher {
	case Cipher2008:
		// {uint clength; x; y; C[136]; M[32]}
		binary.NativeEndian.PutUint32(buf, uint32(len(c.c2)))
		p.putField(buf[4:], c.x)
		p.putField(buf[4+n:], c.y)
		copy(buf[4+2*n:], c.c2)
		copy(buf[4+2*n+maxCipherText:], c.hash)
	default:
		// {x; y; M[32]; uint L; C[L]}
		p.putField(buf, c.x)
		p.putField(buf[n:], c.y)
		copy(buf[2*n:], c.hash)
		binary.NativeEndian.PutUint32(buf[2*n+hashLen:], uint32(len(c.c2)))
		copy(buf[2*n+hashLen+4:], c.c2)
	}
	return buf
}

package accel

import (
	"encoding"
	"errors"
	"hash"
	"io"
	"math/big"
	"math/bits"
	"sync"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm3"
)

// An SM2 signature (GB/T 32918.2) of a digest e with key d and nonce k is
//
//	r = (e + x(k·G)) mod n,  s = (1+d)⁻¹·(k − r·d) mod n = (1+d)⁻¹·(k + r) − r mod n
//
// gmsm computes it with a fresh HMAC-DRBG per signature for the hedged
// nonce (some thirty SM3 compressions, more than the rest of the signature
// but the point multiplication) and converts the key between its big.Int
// and internal forms each time. A server's signing key is fixed, so
// sm2Signer does the per-key work once: (1+d)⁻¹ in Montgomery form and the
// key of the nonce's PRF. Per signature it derives the nonce from fresh
// randomness and the digest through HMAC-SM3 under a key derived from d
// (hedged, as gmsm's is: a failed random source leaves a nonce that is
// still secret and bound to the message), computes k·G with gmsm's
// constant-time base-point multiplication (through package ecdh), and
// does one multiplication modulo n. The arithmetic modulo n runs in the
// same time for every value, with no table and no branch on secret data.

// orderN is the order n of the SM2 curve's base point, least significant
// limb first.
var orderN = [4]uint64{0x53bbf40939d54123, 0x7203df6b21c6052b, 0xffffffffffffffff, 0xfffffffeffffffff}

// scalar is a number modulo n in four 64-bit limbs, least significant
// first.
type scalar [4]uint64

// orderConsts are n's Montgomery constants, derived once.
var orderConsts = sync.OnceValue(func() (c struct {
	nInv uint64 // −n⁻¹ mod 2^64
	r2   scalar // 2^512 mod n
}) {
	inv := uint64(1)
	for range 6 { // Newton's iteration doubles the correct bits
		inv *= 2 - orderN[0]*inv
	}
	c.nInv = -inv
	n := new(big.Int).SetBytes(scalarBytes(orderN))
	r2 := new(big.Int).Lsh(big.NewInt(1), 512)
	c.r2 = scalarFromBytes(r2.Mod(r2, n).FillBytes(make([]byte, 32)))
	return c
})

// scalarFromBytes reads 32 big-endian bytes.
func scalarFromBytes(b []byte) scalar {
	var s scalar
	for i := range s {
		for _, v := range b[32-8*(i+1) : 32-8*i] {
			s[i] = s[i]<<8 | uint64(v)
		}
	}
	return s
}

// scalarBytes writes s as 32 big-endian bytes.
func scalarBytes(s scalar) []byte {
	var b [32]byte
	putScalar(&b, s)
	return b[:]
}

// putScalar writes s into b as 32 big-endian bytes.
func putScalar(b *[32]byte, s scalar) {
	for i, l := range s {
		for j := range 8 {
			b[31-8*i-j] = byte(l >> (8 * j))
		}
	}
}

// subN returns a − n and the borrow.
func subN(a scalar) (scalar, uint64) {
	var d scalar
	var b uint64
	for i := range d {
		d[i], b = bits.Sub64(a[i], orderN[i], b)
	}
	return d, b
}

// selectScalar returns a when mask is all ones, b when it is zero.
func selectScalar(mask uint64, a, b scalar) scalar {
	for i := range a {
		a[i] = a[i]&mask | b[i]&^mask
	}
	return a
}

// reduceOnce returns a mod n for a < 2n held in 256 bits with its carry
// bit (0 or 1) beside.
func reduceOnce(a scalar, carry uint64) scalar {
	d, borrow := subN(a)
	// a − n is the answer unless it borrowed without a carry to pay.
	keep := -(borrow &^ carry) // all ones: keep a
	return selectScalar(keep, a, d)
}

// addMod returns a + b mod n for a, b < n.
func addMod(a, b scalar) scalar {
	var s scalar
	var c uint64
	for i := range s {
		s[i], c = bits.Add64(a[i], b[i], c)
	}
	return reduceOnce(s, c)
}

// subMod returns a − b mod n for a, b < n.
func subMod(a, b scalar) scalar {
	var d scalar
	var borrow uint64
	for i := range d {
		d[i], borrow = bits.Sub64(a[i], b[i], borrow)
	}
	// Add n back when it borrowed.
	mask := -borrow
	var c uint64
	for i := range d {
		d[i], c = bits.Add64(d[i], orderN[i]&mask, c)
	}
	return d
}

// montMul returns a·b·2^−256 mod n for a, b < n (Montgomery
// multiplication, word by word).
func montMul(a, b scalar) scalar {
	nInv := orderConsts().nInv
	var t [6]uint64
	for i := range 4 {
		// t += a·b[i]
		var c uint64
		for j := range 4 {
			hi, lo := bits.Mul64(a[j], b[i])
			var c1, c2 uint64
			lo, c1 = bits.Add64(lo, t[j], 0)
			lo, c2 = bits.Add64(lo, c, 0)
			t[j], c = lo, hi+c1+c2
		}
		var c3 uint64
		t[4], c3 = bits.Add64(t[4], c, 0)
		t[5] = c3
		// t = (t + m·n) / 2^64, with m making the low limb zero.
		m := t[0] * nInv
		hi, lo := bits.Mul64(m, orderN[0])
		_, c1 := bits.Add64(lo, t[0], 0)
		c = hi + c1
		for j := 1; j < 4; j++ {
			hi, lo := bits.Mul64(m, orderN[j])
			var c1, c2 uint64
			lo, c1 = bits.Add64(lo, t[j], 0)
			lo, c2 = bits.Add64(lo, c, 0)
			t[j-1], c = lo, hi+c1+c2
		}
		t[3], c3 = bits.Add64(t[4], c, 0)
		t[4] = t[5] + c3
	}
	return reduceOnce(scalar{t[0], t[1], t[2], t[3]}, t[4])
}

// toMont returns a·2^256 mod n.
func toMont(a scalar) scalar { return montMul(a, orderConsts().r2) }

// invertMont returns a⁻¹ in Montgomery form for a in Montgomery form
// (a ≠ 0), as a^(n−2): the exponent is public, so the branches on its
// bits leak nothing of a.
func invertMont(a scalar) scalar {
	exp := orderN
	exp[0] -= 2 // n is odd and its low limb is far above 2
	one := toMont(scalar{1})
	acc := one
	for i := 255; i >= 0; i-- {
		acc = montMul(acc, acc)
		if exp[i/64]>>(i%64)&1 == 1 {
			acc = montMul(acc, a)
		}
	}
	return acc
}

// isZero returns 1 when s is zero and 0 otherwise, in constant time.
func isZero(s scalar) uint64 {
	x := s[0] | s[1] | s[2] | s[3]
	return 1 ^ (x|-x)>>63
}

// sm2Signer signs digests with one SM2 key; it is safe for concurrent use.
type sm2Signer struct {
	// invDPlus1 is (1+d)⁻¹·2^256 mod n: montMul with it multiplies by
	// (1+d)⁻¹.
	invDPlus1 scalar
	// innerState and outerState are the SM3 states of HMAC-SM3 keyed
	// for the nonce (with SM3 of a label and d) after the key's block.
	innerState, outerState []byte
	// scratches holds *signScratch kept for the next signature.
	scratches sync.Pool
}

// signScratch is what one signature works in, so that a signature
// allocates little more than what it returns. It goes back to its
// signer's pool cleared of everything secret (release).
type signScratch struct {
	h hash.Hash // SM3
	// in is z || e || counter, the nonce PRF's message: z the fresh
	// randomness, e the digest signed.
	in [32 + 32 + 1]byte
	// e is the digest of Z || message, when the signer computes it.
	e [32]byte
	// k is the nonce.
	k [32]byte
}

func (s *sm2Signer) scratch() *signScratch {
	if sc, ok := s.scratches.Get().(*signScratch); ok {
		return sc
	}
	return &signScratch{h: sm3.New()}
}

// release clears sc and keeps it for the next signature. Restoring the
// key's inner state leaves the SM3 state holding only that (the signer
// keeps it anyway) and a block buffer of zeros.
func (s *sm2Signer) release(sc *signScratch) {
	clear(sc.in[:])
	clear(sc.e[:])
	clear(sc.k[:])
	if err := sc.h.(sm3State).UnmarshalBinary(s.innerState); err != nil {
		return // not kept: it could not be cleared
	}
	s.scratches.Put(sc)
}

// sm3State is the state saving of gmsm's SM3.
type sm3State interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

var errSM2Key = errors.New("sm2: the private key is not in [1, n−2]")

// newSM2Signer prepares a signer for the private scalar d (32 big-endian
// bytes).
func newSM2Signer(d []byte) (*sm2Signer, error) {
	if len(d) != 32 {
		return nil, errSM2Key
	}
	ds := scalarFromBytes(d)
	// 1 ≤ d ≤ n−2: d − n borrows, and d + 1 is neither 1 nor n.
	if _, borrow := subN(ds); borrow == 0 || isZero(ds) == 1 {
		return nil, errSM2Key
	}
	dp1 := addMod(ds, scalar{1})
	if isZero(dp1) == 1 {
		return nil, errSM2Key
	}
	s := &sm2Signer{invDPlus1: invertMont(toMont(dp1))}
	clear(ds[:])
	clear(dp1[:])
	h := sm3.New()
	h.Write([]byte("gmgate SM2 signature nonce key\x00"))
	h.Write(d)
	var pad [64]byte
	h.Sum(pad[:0])
	for i := range pad {
		pad[i] ^= 0x36
	}
	var err error
	if s.innerState, err = keyedState(pad[:]); err != nil {
		return nil, err
	}
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	if s.outerState, err = keyedState(pad[:]); err != nil {
		return nil, err
	}
	clear(pad[:])
	return s, nil
}

// keyedState returns the saved SM3 state after one block.
func keyedState(block []byte) ([]byte, error) {
	h := sm3.New()
	h.Write(block)
	saver, ok := h.(sm3State)
	if !ok {
		return nil, errors.New("sm2: SM3 cannot save its state")
	}
	return saver.MarshalBinary()
}

// nonce writes HMAC-SM3(nonce key, z || e || ctr) into sc.k, for the z
// and e in sc.in.
func (s *sm2Signer) nonce(sc *signScratch, ctr byte) {
	h := sc.h
	st := h.(sm3State)
	st.UnmarshalBinary(s.innerState)
	sc.in[64] = ctr
	h.Write(sc.in[:])
	h.Sum(sc.k[:0])
	st.UnmarshalBinary(s.outerState)
	h.Write(sc.k[:])
	h.Sum(sc.k[:0])
}

// signMessage returns the ASN.1 signature of SM3(za || msg), with
// randomness from rand.
func (s *sm2Signer) signMessage(rand io.Reader, za, msg []byte) ([]byte, error) {
	sc := s.scratch()
	defer s.release(sc)
	sc.h.Reset()
	sc.h.Write(za)
	sc.h.Write(msg)
	sc.h.Sum(sc.e[:0])
	return s.signWith(sc, rand, sc.e[:])
}

// sign returns the ASN.1 signature of the 32-byte digest e, with
// randomness from rand.
func (s *sm2Signer) sign(rand io.Reader, e []byte) ([]byte, error) {
	sc := s.scratch()
	defer s.release(sc)
	return s.signWith(sc, rand, e)
}

func (s *sm2Signer) signWith(sc *signScratch, rand io.Reader, e []byte) ([]byte, error) {
	if len(e) != sm3.Size {
		return nil, errors.New("sm2: digest is not 32 bytes")
	}
	copy(sc.in[32:64], e)
	if _, err := io.ReadFull(rand, sc.in[:32]); err != nil {
		return nil, err
	}
	es, borrow := subN(scalarFromBytes(e))
	es = selectScalar(-borrow, scalarFromBytes(e), es) // e mod n
	kb := &sc.k
	for ctr := byte(0); ; ctr++ {
		if ctr == 255 {
			return nil, errors.New("sm2: no nonce found")
		}
		// k = HMAC-SM3(nonceKey, z || e || ctr), until it is a valid
		// scalar (all but about 2^−32 of the time the first one is).
		s.nonce(sc, ctr)
		// ecdh takes k in [1, n−2] and computes k·G in constant time.
		kp, err := ecdh.P256().NewPrivateKey(kb[:])
		if err != nil {
			continue
		}
		point := kp.PublicKey().Bytes() // 04 || x || y
		x, borrow := subN(scalarFromBytes(point[1:33]))
		x = selectScalar(-borrow, scalarFromBytes(point[1:33]), x) // x mod n (x < p < 2n)
		r := addMod(es, x)
		k := scalarFromBytes(kb[:])
		kr := addMod(k, r)
		// r = 0 or r + k = n: another k (negligibly rare).
		if isZero(r) == 1 || isZero(kr) == 1 {
			continue
		}
		sv := subMod(montMul(s.invDPlus1, kr), r)
		clear(k[:])
		clear(kr[:])
		clear(kb[:])
		if isZero(sv) == 1 {
			continue
		}
		return encodeSM2Signature(r, sv)
	}
}

// encodeSM2Signature writes SEQUENCE { r INTEGER, s INTEGER } in DER:
// each integer in its fewest bytes, with a zero byte in front when its
// top bit is set. r and s are public.
func encodeSM2Signature(r, s scalar) ([]byte, error) {
	var rb, sb [32]byte
	putScalar(&rb, r)
	putScalar(&sb, s)
	ri, si := trimInteger(rb[:]), trimInteger(sb[:])
	body := derIntegerLen(ri) + derIntegerLen(si) // at most 70: short-form lengths
	out := make([]byte, 0, 2+body)
	out = append(out, 0x30, byte(body))
	out = appendDERInteger(out, ri)
	return appendDERInteger(out, si), nil
}

// trimInteger drops the leading zero bytes of a big-endian number but
// its last byte.
func trimInteger(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// derIntegerLen is the length of the DER INTEGER of trimmed b, with its
// tag and length: a zero byte goes in front of a set top bit.
func derIntegerLen(b []byte) int {
	return 2 + len(b) + int(b[0]>>7)
}

// appendDERInteger appends the DER INTEGER of trimmed b.
func appendDERInteger(out, b []byte) []byte {
	out = append(out, 0x02, byte(derIntegerLen(b)-2))
	if b[0]&0x80 != 0 {
		out = append(out, 0)
	}
	return append(out, b...)
}

package sm4cbc

import (
	"math/bits"
	"sync"
	"unsafe"
)

// This file derives the constants of the AES-NI kernel (aesni_amd64.s):
// how AESENCLAST, which inverts in the AES field and applies AES's affine
// map, computes the SM4 S-box between two affine maps that PSHUFB does as
// two 16-entry lookups, one per nibble.
//
// With the notation of gf.go, S(x) = A·φ⁻¹·invAES(φ·A·x ⊕ φ(c)) ⊕ c, and
// AESENCLAST with a zero round key gives y = Aaes·invAES(z) ⊕ 0x63 for
// each byte z (then moves the bytes by ShiftRows). So
//
//	z    = (φ·A)·x ⊕ φ(c)                        pre
//	S(x) = (A·φ⁻¹·Aaes⁻¹)·y ⊕ (A·φ⁻¹·Aaes⁻¹)·0x63 ⊕ c   post
//
// An affine map f(x) = M·x ⊕ d of a byte is f_lo(x & 15) ⊕ f_hi(x >> 4)
// with f_lo(i) = M·i ⊕ d and f_hi(i) = M·(i << 4).

// aesniKey is what the AES-NI kernel reads; its layout is fixed by
// aesni_amd64.s.
type aesniKey struct {
	// rk are the round keys in the state's image (vectorRoundKeys), one
	// copy per lane.
	rk   [33][lanes]uint32
	mask [16]byte // 0x0f
	// pre and post surround AESENCLAST in the S-box of the key schedule.
	preLo, preHi   [16]byte
	postLo, postHi [16]byte
	// rot[r] undoes ShiftRows and rotates each 32-bit lane left by 8r
	// bits.
	rot  [4][16]byte
	zero [16]byte // AESENCLAST's round key
	// in and out are the matrices into the state's image and back.
	inLo, inHi, outLo, outHi [16]byte
	// round[o] is B_o·Aaes⁻¹ (with the constant that undoes AES's 0x63):
	// applied to AESENCLAST's output it is what GF2P8AFFINEINVQB with B_o
	// gives in kernel_amd64.s.
	round [4][2][16]byte
}

// aesAffine is the affine map of the AES S-box without its constant.
func aesAffine(v byte) byte {
	return v ^ bits.RotateLeft8(v, 1) ^ bits.RotateLeft8(v, 2) ^ bits.RotateLeft8(v, 3) ^ bits.RotateLeft8(v, 4)
}

// nibbleTables returns the two PSHUFB tables of x ↦ m·x ⊕ d.
func nibbleTables(m bitMatrix, d byte) (lo, hi [16]byte) {
	for i := range lo {
		lo[i] = m.apply(byte(i)) ^ d
		hi[i] = m.apply(byte(i << 4))
	}
	return lo, hi
}

// aesniConstants returns an aesniKey with every constant and no round
// keys.
func aesniConstants() *aesniKey {
	k := new(aesniKey)
	iso := fieldIso()
	pre := iso.mul(sboxA)
	post := sboxA.mul(iso.inverse()).mul(matrixOf(aesAffine).inverse())
	k.preLo, k.preHi = nibbleTables(pre, iso.apply(sboxC))
	k.postLo, k.postHi = nibbleTables(post, post.apply(0x63)^sboxC)
	k.inLo, k.inHi = nibbleTables(tables.in, 0)
	k.outLo, k.outHi = nibbleTables(tables.out, 0)
	aesInv := matrixOf(aesAffine).inverse()
	for o, b := range tables.round {
		m := b.mul(aesInv)
		k.round[o][0], k.round[o][1] = nibbleTables(m, m.apply(0x63))
	}
	for i := range k.mask {
		k.mask[i] = 0x0f
	}
	// AESENCLAST leaves at byte r+4c the S-box of input byte r+4(c+r mod
	// 4); byte k of lane c after a rotation by 8r comes from byte k-r.
	for r := range k.rot {
		for i := range k.rot[r] {
			c, b := i/4, (i-r)&3
			k.rot[r][i] = byte(b + 4*((c-b)&3))
		}
	}
	return k
}

// aesniTemplate is aesniConstants derived once, for each new key to
// copy: deriving them takes matrix inversions, which cost more than the
// rest of a key schedule.
var aesniTemplate = sync.OnceValue(aesniConstants)

// aesniModel is what the kernel's S-box computes for the 16 bytes of a
// register, AESENCLAST included, from the constants of k: the test of
// those constants on any architecture.
func aesniModel(k *aesniKey, in [16]byte) (out [16]byte) {
	var y [16]byte
	for i, x := range in {
		z := k.preLo[x&15] ^ k.preHi[x>>4]
		sub := aesAffine(gfInv(z, polyAES)) ^ 0x63
		// ShiftRows: output byte r+4c is input byte r+4(c+r mod 4).
		r := i % 4
		y[r+4*((i/4-r)&3)] = sub
	}
	for i, v := range y {
		y[i] = k.postLo[v&15] ^ k.postHi[v>>4]
	}
	for i := range out {
		out[i] = y[k.rot[0][i]]
	}
	return out
}

// aesniLanes is the state of the AES-NI kernel for one key.
type aesniLanes struct {
	key  *aesniKey
	ptr  [lanes]*byte
	step [lanes]uintptr
	// idle is where an idle lane reads and writes: an IV and one block of
	// no use.
	idle [2 * BlockSize]byte
}

// encrypt runs the chains through the lanes, giving a lane the next chain
// as soon as its own ends.
func (s *aesniLanes) encrypt(chains [][]byte) {
	var (
		cur  [lanes][]byte // the chain in each lane
		off  [lanes]int    // where its IV for the next call is
		next int
	)
	for {
		n := -1
		for l := range cur {
			if off[l]+BlockSize >= len(cur[l]) {
				cur[l], off[l] = nil, 0
				for next < len(chains) && cur[l] == nil {
					if len(chains[next]) > BlockSize {
						cur[l] = chains[next]
					}
					next++
				}
			}
			if cur[l] == nil {
				s.ptr[l], s.step[l] = &s.idle[0], 0
				continue
			}
			s.ptr[l], s.step[l] = &cur[l][off[l]], BlockSize
			if left := (len(cur[l]) - off[l]) / BlockSize; n < 0 || left-1 < n {
				n = left - 1
			}
		}
		if n < 0 {
			break
		}
		encryptLanesAESNI(s.key, &s.ptr, &s.step, n)
		for l := range cur {
			if cur[l] != nil {
				off[l] += n * BlockSize
			}
		}
	}
	// Do not keep the caller's buffers reachable.
	s.ptr = [lanes]*byte{}
}

// newAESNIKey returns the kernel's key for a 16-byte key; the key schedule
// takes its S-box from the kernel too, so that no table is indexed by the
// key.
func newAESNIKey(key []byte) *aesniKey {
	k := new(aesniKey)
	*k = *aesniTemplate()
	rk := expandKeyWith(key, k.tau)
	for i, r := range vectorRoundKeys(&rk) {
		for l := range k.rk[i] {
			k.rk[i][l] = r
		}
	}
	return k
}

// tau applies the S-box to each byte of a word with the kernel's code.
func (k *aesniKey) tau(a uint32) uint32 {
	var b [16]byte
	b[0], b[1], b[2], b[3] = byte(a), byte(a>>8), byte(a>>16), byte(a>>24)
	sboxAESNI(k, &b)
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// Ensure the layout aesni_amd64.s relies on.
var _ [752]struct{} = [unsafe.Offsetof(aesniKey{}.round)]struct{}{}
var _ [672]struct{} = [unsafe.Offsetof(aesniKey{}.zero)]struct{}{}

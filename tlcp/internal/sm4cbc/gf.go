package sm4cbc

import (
	"encoding/binary"
	"math/bits"
)

// This file derives, at start-up, everything the vector code needs from
// the definition of SM4 in GB/T 32907-2016: the S-box, the key schedule,
// and the bit matrices that let GF2P8AFFINEINVQB compute the S-box and the
// linear transform L together.
//
// The S-box is an inversion in a finite field between two affine maps:
//
//	S(x) = A·inv(A·x ⊕ c) ⊕ c
//
// in GF(2^8) with the polynomial x^8+x^7+x^6+x^5+x^4+x^2+1 (0x1F5), A the
// circulant matrix whose first row is 0xA7, c = 0xD3. GF2P8AFFINEINVQB
// inverts in the AES field (0x11B); a field isomorphism φ from the SM4
// field to the AES field moves the inversion over:
//
//	S(x) = (A·φ⁻¹)·invAES(φ·A·x ⊕ φ(c)) ⊕ c
//
// The vector code keeps the cipher state in the image of the input matrix
// (Y = φ·A applied to every byte), so that the first affine map is folded
// into the state and the round keys, and the output matrix, L and the
// way back into that image become four matrices B_o, one per byte offset
// of L (see lMatrices).

// bitMatrix is an 8×8 matrix over GF(2): row i is the mask of input bits
// whose parity is output bit i.
type bitMatrix [8]byte

func (m bitMatrix) apply(x byte) byte {
	var out byte
	for i, row := range m {
		out |= byte(bits.OnesCount8(row&x)&1) << i
	}
	return out
}

// mul returns the matrix of x ↦ m·(n·x).
func (m bitMatrix) mul(n bitMatrix) bitMatrix {
	return matrixOf(func(x byte) byte { return m.apply(n.apply(x)) })
}

// matrixOf returns the matrix of a linear map of bytes.
func matrixOf(f func(byte) byte) bitMatrix {
	var m bitMatrix
	for j := 0; j < 8; j++ {
		col := f(1 << j)
		for i := 0; i < 8; i++ {
			m[i] |= (col >> i & 1) << j
		}
	}
	return m
}

// inverse returns the inverse of an invertible matrix.
func (m bitMatrix) inverse() bitMatrix {
	var table [256]byte
	for x := 0; x < 256; x++ {
		table[m.apply(byte(x))] = byte(x)
	}
	return matrixOf(func(y byte) byte { return table[y] })
}

// qword is m in the layout of GF2P8AFFINEQB's matrix operand: byte 7-i of
// the quadword is row i.
func (m bitMatrix) qword() uint64 {
	var q uint64
	for i, row := range m {
		q |= uint64(row) << (8 * (7 - i))
	}
	return q
}

// gfMul multiplies in GF(2^8) modulo poly.
func gfMul(a, b byte, poly uint16) byte {
	var r uint16
	x := uint16(a)
	for ; b != 0; b >>= 1 {
		if b&1 != 0 {
			r ^= x
		}
		x <<= 1
		if x&0x100 != 0 {
			x ^= poly
		}
	}
	return byte(r)
}

// gfInv inverts in GF(2^8) modulo poly (a^254), with inv(0) = 0.
func gfInv(a byte, poly uint16) byte {
	r := byte(1)
	for e := 254; e > 0; e >>= 1 {
		if e&1 != 0 {
			r = gfMul(r, a, poly)
		}
		a = gfMul(a, a, poly)
	}
	return r
}

const (
	polySM4 = 0x1F5
	polyAES = 0x11B
	sboxC   = 0xD3
)

// sboxA is the circulant matrix of the S-box: row i is 0xA7 rotated left
// by i.
var sboxA = func() bitMatrix {
	var m bitMatrix
	for i := range m {
		m[i] = bits.RotateLeft8(0xA7, i)
	}
	return m
}()

// fieldIso returns the matrix of the isomorphism from the SM4 field to the
// AES field that sends the class of x to the smallest root of the SM4
// polynomial in the AES field.
func fieldIso() bitMatrix {
	for beta := 2; beta < 256; beta++ {
		// p(β) = β^8+β^7+β^6+β^5+β^4+β^2+1 in the AES field.
		var acc byte
		pow := byte(1)
		for i := 0; i <= 8; i++ {
			if polySM4>>i&1 != 0 {
				acc ^= pow
			}
			pow = gfMul(pow, byte(beta), polyAES)
		}
		if acc != 0 {
			continue
		}
		// Column j is β^j.
		return matrixOf(func(x byte) byte {
			var y byte
			pow := byte(1)
			for j := 0; j < 8; j++ {
				if x>>j&1 != 0 {
					y ^= pow
				}
				pow = gfMul(pow, byte(beta), polyAES)
			}
			return y
		})
	}
	panic("sm4cbc: no root of the SM4 field polynomial in the AES field")
}

// sbox is the SM4 S-box, computed from its definition.
var sbox = func() [256]byte {
	var s [256]byte
	for x := range s {
		s[x] = sboxA.apply(gfInv(sboxA.apply(byte(x))^sboxC, polySM4)) ^ sboxC
	}
	return s
}()

// tau applies the S-box to each byte of a word.
func tau(a uint32) uint32 {
	return uint32(sbox[a>>24])<<24 | uint32(sbox[a>>16&0xff])<<16 | uint32(sbox[a>>8&0xff])<<8 | uint32(sbox[a&0xff])
}

// linear is L, the linear transform of the round function.
func linear(b uint32) uint32 {
	return b ^ bits.RotateLeft32(b, 2) ^ bits.RotateLeft32(b, 10) ^ bits.RotateLeft32(b, 18) ^ bits.RotateLeft32(b, 24)
}

// linearKey is L', the linear transform of the key schedule.
func linearKey(b uint32) uint32 {
	return b ^ bits.RotateLeft32(b, 13) ^ bits.RotateLeft32(b, 23)
}

var fk = [4]uint32{0xa3b1bac6, 0x56aa3350, 0x677d9197, 0xb27022dc}

// expandKey returns the 32 round keys of a 16-byte key, with the S-box
// from its table: the reference of the tests.
func expandKey(key []byte) [32]uint32 { return expandKeyWith(key, tau) }

// expandKeyWith returns the 32 round keys of a 16-byte key, with tau
// applying the S-box to the bytes of a word.
func expandKeyWith(key []byte, tau func(uint32) uint32) [32]uint32 {
	var k [36]uint32
	for i := 0; i < 4; i++ {
		k[i] = binary.BigEndian.Uint32(key[4*i:]) ^ fk[i]
	}
	var rk [32]uint32
	for i := 0; i < 32; i++ {
		// CK_i: byte j is (4i+j)·7 mod 256.
		var ck uint32
		for j := 0; j < 4; j++ {
			ck = ck<<8 | uint32(byte((4*i+j)*7))
		}
		k[i+4] = k[i] ^ linearKey(tau(k[i+1]^k[i+2]^k[i+3]^ck))
		rk[i] = k[i+4]
	}
	return rk
}

// encryptBlock is SM4 as the standard writes it: the reference the vector
// code is tested against, and the single-block cipher of the tests.
func encryptBlock(rk *[32]uint32, dst, src []byte) {
	var x [36]uint32
	for i := 0; i < 4; i++ {
		x[i] = binary.BigEndian.Uint32(src[4*i:])
	}
	for i := 0; i < 32; i++ {
		x[i+4] = x[i] ^ linear(tau(x[i+1]^x[i+2]^x[i+3]^rk[i]))
	}
	for i := 0; i < 4; i++ {
		binary.BigEndian.PutUint32(dst[4*i:], x[35-i])
	}
}

// The vector code loads each 4-byte word of a block as a little-endian
// 32-bit lane (byte k of the lane is byte k of the word in memory, the
// standard's byte 3-k of the big-endian word value). In that layout L is
// four 8×8 matrices, one per byte offset o: byte j of the input feeds byte
// j+o (mod 4) of the output through N_o, and the byte move is a left
// rotation of the lane by 8·o bits.

// laneLinear is L on a little-endian lane.
func laneLinear(d uint32) uint32 { return bits.ReverseBytes32(linear(bits.ReverseBytes32(d))) }

// lMatrices returns N_0..N_3 and whether L really has that form.
func lMatrices() (n [4]bitMatrix, ok bool) {
	ok = true
	for o := 0; o < 4; o++ {
		for j := 0; j < 4; j++ {
			m := matrixOf(func(x byte) byte {
				return byte(laneLinear(uint32(x)<<(8*j)) >> (8 * ((j + o) % 4)))
			})
			if j == 0 {
				n[o] = m
			} else if m != n[o] {
				ok = false
			}
		}
	}
	return n, ok
}

// vectorTables are the constants of the vector code.
type vectorTables struct {
	// in is the matrix into the state's image (φ·A), out the one back.
	in, out bitMatrix
	// inColumns are in's columns, for the key schedule.
	inColumns byteColumns
	// inConst is φ(c), the constant added before the inversion.
	inConst byte
	// round are the matrices B_o = in·N_o·A·φ⁻¹ applied to the inverse
	// in the AES field, one per byte rotation.
	round [4]bitMatrix
	// roundConst is what the S-box's final constant adds to a state word
	// through L and the input matrix: the same byte in every position.
	roundConst byte
}

func newVectorTables() vectorTables {
	iso := fieldIso()
	var t vectorTables
	t.in = iso.mul(sboxA)
	t.inColumns = t.in.columns()
	t.out = t.in.inverse()
	t.inConst = iso.apply(sboxC)
	outer := sboxA.mul(iso.inverse()) // applied to the AES-field inverse
	n, ok := lMatrices()
	if !ok {
		panic("sm4cbc: L is not a sum of byte rotations")
	}
	for o := range n {
		t.round[o] = t.in.mul(n[o]).mul(outer)
		t.roundConst ^= t.in.apply(n[o].apply(sboxC))
	}
	return t
}

var tables = newVectorTables()

// applyBytes applies m to each byte of a lane.
func applyBytes(m bitMatrix, d uint32) uint32 {
	c := m.columns()
	return c.applyBytes(d)
}

// byteColumns are the images of the eight unit bytes under a bitMatrix.
type byteColumns [8]uint32

func (m bitMatrix) columns() byteColumns {
	var c byteColumns
	for j := range c {
		c[j] = uint32(m.apply(1 << j))
	}
	return c
}

// applyBytes applies the matrix to the four bytes of d at once, as the
// sum of the columns that d's bits select: bit j of every byte, as 0 or 1,
// times column j (at most 255) stays inside its byte. It runs in the same
// time for every d, with no table indexed by it (bits.OnesCount8 reads
// one), as the key schedule needs.
func (c *byteColumns) applyBytes(d uint32) uint32 {
	var out uint32
	for j, col := range c {
		out ^= (d >> j & 0x01010101) * col
	}
	return out
}

func repeatByte(b byte) uint32 { return uint32(b) * 0x01010101 }

// vectorRoundKeys returns the round keys as the vector code uses them,
// each in the state's image, with the constants of the S-box folded in:
// φ(c) before the inversion, and the constant the S-box adds to every
// other group of four state words (see encryptBlockVector). A 33rd key of
// zero lets the last round run like the others.
func vectorRoundKeys(rk *[32]uint32) [33]uint32 {
	var out [33]uint32
	// offset(k) is what state word k differs by from the one the vector
	// code holds: the S-box constant, for words 4..7, 12..15 and so on.
	offset := func(k int) uint32 {
		if k/4%2 == 1 {
			return repeatByte(tables.roundConst)
		}
		return 0
	}
	for i := 0; i < 32; i++ {
		out[i] = tables.inColumns.applyBytes(bits.ReverseBytes32(rk[i])) ^ repeatByte(tables.inConst) ^
			offset(i+1) ^ offset(i+2) ^ offset(i+3)
	}
	return out
}

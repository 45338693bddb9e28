package sm4cbc

// The round function of the vector code serves more than CBC: package
// sm4gcm runs it on sixteen counter blocks at once. These exports give it
// the same derived constants, so that both kernels rest on one derivation.

// Matrices are the GF2P8AFFINEQB and GF2P8AFFINEINVQB operands of the
// vector round function (see gf.go), each in the instructions' quadword
// layout.
type Matrices struct {
	// In maps a byte into the state's image (φ·A), Out back.
	In, Out uint64
	// Round are B_0..B_3, applied to the AES-field inverse, one per byte
	// rotation of the linear transform.
	Round [4]uint64
}

// VectorMatrices returns the matrices of the vector round function.
func VectorMatrices() Matrices {
	m := Matrices{
		In:  tables.in.qword(),
		Out: tables.out.qword(),
	}
	for o, r := range tables.round {
		m.Round[o] = r.qword()
	}
	return m
}

// VectorRoundKeysGFNI returns the 33 round keys of the vector round
// function for a 16-byte key (each in the state's image, with the S-box
// constants folded in, the last zero), the whole schedule in one call
// with the S-box of GFNI and no table indexed by the key. It is for CPUs
// with GFNI and AVX-512 (F, VL), the ones the vector kernels run on, and
// panics elsewhere.
func VectorRoundKeysGFNI(key []byte) [33]uint32 {
	if !haveLanes {
		panic("sm4cbc: VectorRoundKeysGFNI without GFNI and AVX-512")
	}
	if len(key) != 16 {
		panic("sm4cbc: VectorRoundKeysGFNI of a key that is not 16 bytes")
	}
	return vectorRoundKeysGFNI(key)
}

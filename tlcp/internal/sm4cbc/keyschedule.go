package sm4cbc

import "sync"

// gfniKeyConsts is what expandKeyGFNI reads; its layout is fixed by
// keygfni_amd64.s.
type gfniKeyConsts struct {
	in      [2]uint64  // tables.in, in both quadwords
	inConst [16]byte   // φ(c), the S-box constant in the AES field
	sboxOut [2]uint64  // A·φ⁻¹, back out of the AES field
	fk      [4]uint32  // FK
	ck      [32]uint32 // CK_0..CK_31
	offs    [32]uint32 // the constants vectorRoundKeys adds to key i
}

// gfniConsts are the key schedule's constants, derived once.
var gfniConsts = sync.OnceValue(func() *gfniKeyConsts {
	c := new(gfniKeyConsts)
	c.in = [2]uint64{tables.in.qword(), tables.in.qword()}
	for i := range c.inConst {
		c.inConst[i] = tables.inConst
	}
	out := sboxA.mul(fieldIso().inverse()).qword()
	c.sboxOut = [2]uint64{out, out}
	c.fk = fk
	for i := range c.ck {
		for j := 0; j < 4; j++ {
			c.ck[i] = c.ck[i]<<8 | uint32(byte((4*i+j)*7))
		}
	}
	offset := func(k int) uint32 {
		if k/4%2 == 1 {
			return repeatByte(tables.roundConst)
		}
		return 0
	}
	for i := range c.offs {
		c.offs[i] = repeatByte(tables.inConst) ^ offset(i+1) ^ offset(i+2) ^ offset(i+3)
	}
	return c
})

// vectorRoundKeysGFNI returns vectorRoundKeys(expandKey(key)) for a
// 16-byte key, computed with GFNI (haveLanes) and no table indexed by
// the key.
func vectorRoundKeysGFNI(key []byte) [33]uint32 {
	var out [33]uint32
	expandKeyGFNI(gfniConsts(), (*[16]byte)(key), &out)
	return out
}

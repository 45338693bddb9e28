//go:build !purego

#include "textflag.h"

// The SM4 key schedule for the vector kernels, for CPUs with GFNI and
// AVX-512: the four key words stay in general registers, and each round's
// S-box is one GF2P8AFFINEQB, one XOR and one GF2P8AFFINEINVQB on the
// word (see gf.go). Nothing is looked up in memory by key data. A last
// pass maps all 32 round keys into the state's image at once (the matrix
// in on every byte, then the constants of vectorRoundKeys).

// Offsets in gfniKeyConsts (kernel_amd64.go checks them).
#define KC_IN 0
#define KC_INCONST 16
#define KC_SBOXOUT 32
#define KC_FK 48
#define KC_CK 64
#define KC_OFFS 192

// KEYROUND computes K[i+4] = A ^ L'(S(B ^ C ^ D ^ CK[i])) into A and stores
// it byte-reversed at out[i]; CX is 4i rounded down to a multiple of 16,
// off the rest.
#define KEYROUND(A, B, C, D, off) \
	MOVL  B, AX                            \
	XORL  C, AX                            \
	XORL  D, AX                            \
	XORL  KC_CK+off(DI)(CX*1), AX          \
	VMOVD AX, X0                           \
	VGF2P8AFFINEQB $0, X1, X0, X0          \
	VPXOR X2, X0, X0                       \
	VGF2P8AFFINEINVQB $0xd3, X3, X0, X0    \
	VMOVD X0, AX                           \
	XORL  AX, A                            \
	ROLL  $13, AX                          \
	XORL  AX, A                            \
	ROLL  $10, AX                          \
	XORL  AX, A                            \
	MOVL  A, BX                            \
	BSWAPL BX                              \
	MOVL  BX, off(DX)(CX*1)

// func expandKeyGFNI(c *gfniKeyConsts, key *[16]byte, out *[33]uint32)
TEXT ·expandKeyGFNI(SB), NOSPLIT, $0-24
	MOVQ c+0(FP), DI
	MOVQ key+8(FP), SI
	MOVQ out+16(FP), DX

	MOVL   0(SI), R8
	BSWAPL R8
	XORL   KC_FK+0(DI), R8
	MOVL   4(SI), R9
	BSWAPL R9
	XORL   KC_FK+4(DI), R9
	MOVL   8(SI), R10
	BSWAPL R10
	XORL   KC_FK+8(DI), R10
	MOVL   12(SI), R11
	BSWAPL R11
	XORL   KC_FK+12(DI), R11

	VMOVDQU KC_IN(DI), X1
	VMOVDQU KC_INCONST(DI), X2
	VMOVDQU KC_SBOXOUT(DI), X3
	XORQ    CX, CX

keyLoop:
	KEYROUND(R8, R9, R10, R11, 0)
	KEYROUND(R9, R10, R11, R8, 4)
	KEYROUND(R10, R11, R8, R9, 8)
	KEYROUND(R11, R8, R9, R10, 12)
	ADDQ $16, CX
	CMPQ CX, $128
	JB   keyLoop

	// Into the state's image: in on every byte, then the constants.
	VPBROADCASTQ KC_IN(DI), Z4
	VMOVDQU32    0(DX), Z5
	VMOVDQU32    64(DX), Z6
	VGF2P8AFFINEQB $0, Z4, Z5, Z5
	VGF2P8AFFINEQB $0, Z4, Z6, Z6
	VPXORD       KC_OFFS(DI), Z5, Z5
	VPXORD       KC_OFFS+64(DI), Z6, Z6
	VMOVDQU32    Z5, 0(DX)
	VMOVDQU32    Z6, 64(DX)
	MOVL         $0, 128(DX)

	XORL AX, AX
	XORL BX, BX
	XORL R8, R8
	XORL R9, R9
	XORL R10, R10
	XORL R11, R11
	VPXOR X0, X0, X0
	VZEROUPPER
	RET

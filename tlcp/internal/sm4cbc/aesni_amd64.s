//go:build !purego

#include "textflag.h"

// SM4-CBC encryption of four chains at once with AES-NI and AVX, for CPUs
// without GFNI (Hygon, Zen 1-3, Intel before Ice Lake). It is
// kernel_amd64.s with each GF2P8AFFINEINVQB replaced: the state is kept in
// the same image of the matrix in (see gf.go), the round keys are the
// same, and where that kernel computes B_o·inv(x) for the four matrices
// B_o, this one computes one
//
//	y = AESENCLAST(x, 0)      inversion in the AES field, AES's affine
//	                          map, bytes moved by ShiftRows
//
// and then, for each o, (B_o·Aaes⁻¹)·(y ^ 0x63) as two PSHUFB lookups, one
// per nibble, whose tables aesniConstants derives, and one PSHUFB that
// undoes ShiftRows and rotates the lanes by 8·o bits. No table is indexed
// in memory by data: PSHUFB selects within a register.
//
// Registers:
//	DI        aesniKey
//	R8-R11    lane pointers (IV, then the current ciphertext block)
//	AX,BX,CX,DX  lane steps (16, or 0 for an idle lane)
//	SI        blocks left
//	X0-X3     state words (rotating roles)
//	X4        x; X5 Y[j+2]^Y[j+3]^rk[j+1]
//	X6-X9     the four products, loads and stores
//	X10       0x0f in every byte; X11, X12 the low and high nibbles of y
//	X13-X15   tables, temporaries

#define KEY_MASK 528
#define KEY_PRE_LO 544
#define KEY_PRE_HI 560
#define KEY_POST_LO 576
#define KEY_POST_HI 592
#define KEY_ROT0 608
#define KEY_ROT8 624
#define KEY_ROT16 640
#define KEY_ROT24 656
#define KEY_ZERO 672
#define KEY_IN_LO 688
#define KEY_IN_HI 704
#define KEY_OUT_LO 720
#define KEY_OUT_HI 736
#define KEY_ROUND 752

// PRODUCT leaves in dst (B_o·Aaes⁻¹)·(y ^ 0x63), its bytes put back in
// place and rotated by 8·o bits, for the nibbles of y in X11 and X12.
#define PRODUCT(o, dst) \
	VMOVDQU KEY_ROUND+32*o(DI), X13    \
	VMOVDQU KEY_ROUND+32*o+16(DI), X14 \
	VPSHUFB X11, X13, X13 \
	VPSHUFB X12, X14, X14 \
	VPXOR   X14, X13, X13 \
	VPSHUFB KEY_ROT0+16*o(DI), X13, dst

// ROUND runs round j with state A=Y[j], B=Y[j+1], C=Y[j+2], D=Y[j+3] and
// x in X4; it leaves Y[j+4] in A and x[j+1] in X4. rk is the offset of
// round key j+1.
#define ROUND(rk, A, B, C, D) \
	VAESENCLAST KEY_ZERO(DI), X4, X4 \
	VPSRLQ  $4, X4, X12  \
	VPAND   X10, X4, X11 \
	VPAND   X10, X12, X12 \
	VPXOR   rk(DI), C, X5 \
	VPXOR   D, X5, X5     \
	VPXOR   A, X5, X4     \
	PRODUCT(0, X6) \
	PRODUCT(1, X7) \
	PRODUCT(2, X8) \
	PRODUCT(3, X9) \
	VPXOR   X6, X7, X6 \
	VPXOR   X8, X9, X8 \
	VPXOR   X6, X4, X4 \
	VPXOR   X8, X4, X4 \
	VPXOR   X4, X5, A

// FOUR_ROUNDS runs rounds j..j+3; rk is the offset of round key j+1.
#define FOUR_ROUNDS(rk) \
	ROUND(rk, X0, X1, X2, X3)    \
	ROUND(rk+16, X1, X2, X3, X0) \
	ROUND(rk+32, X2, X3, X0, X1) \
	ROUND(rk+48, X3, X0, X1, X2)

// TRANSPOSE turns four rows of four 32-bit words a, b, c, d into columns,
// left in b, d, t0, t1 (column 0 to 3). a and c are clobbered.
#define TRANSPOSE(a, b, c, d, t0, t1) \
	VPUNPCKLDQ  b, a, t0  \
	VPUNPCKHDQ  b, a, a   \
	VPUNPCKLDQ  d, c, t1  \
	VPUNPCKHDQ  d, c, c   \
	VPUNPCKLQDQ t1, t0, b \
	VPUNPCKHQDQ t1, t0, d \
	VPUNPCKLQDQ c, a, t0  \
	VPUNPCKHQDQ c, a, t1

// IMAGE applies the matrix whose nibble tables are at lo and hi to each
// byte of r. X13 and X14 are clobbered.
#define IMAGE(lo, hi, r) \
	VPSRLQ  $4, r, X14   \
	VPAND   X10, r, X13  \
	VPAND   X10, X14, X14 \
	VMOVDQU lo(DI), X15  \
	VPSHUFB X13, X15, X13 \
	VMOVDQU hi(DI), X15  \
	VPSHUFB X14, X15, X14 \
	VPXOR   X14, X13, r

// LOAD_WORDS loads the block at off from each lane pointer and leaves its
// words, in the state's image, in X5 (word 0), X7, X8, X9 (word 3).
#define LOAD_WORDS(off) \
	VMOVDQU off(R8), X4  \
	VMOVDQU off(R9), X5  \
	VMOVDQU off(R10), X6 \
	VMOVDQU off(R11), X7 \
	TRANSPOSE(X4, X5, X6, X7, X8, X9) \
	IMAGE(KEY_IN_LO, KEY_IN_HI, X5) \
	IMAGE(KEY_IN_LO, KEY_IN_HI, X7) \
	IMAGE(KEY_IN_LO, KEY_IN_HI, X8) \
	IMAGE(KEY_IN_LO, KEY_IN_HI, X9)

// func encryptLanesAESNI(k *aesniKey, ptr *[4]*byte, step *[4]uintptr, n int)
TEXT ·encryptLanesAESNI(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), DI
	MOVQ ptr+8(FP), SI
	MOVQ 0(SI), R8
	MOVQ 8(SI), R9
	MOVQ 16(SI), R10
	MOVQ 24(SI), R11
	MOVQ step+16(FP), SI
	MOVQ 0(SI), AX
	MOVQ 8(SI), BX
	MOVQ 16(SI), CX
	MOVQ 24(SI), DX
	MOVQ n+24(FP), SI
	TESTQ SI, SI
	JZ   done

	VMOVDQU KEY_MASK(DI), X10

	// The IVs stand for the previous ciphertext block, whose words 0-3
	// the rounds leave in X3, X2, X1, X0.
	LOAD_WORDS(0)
	VMOVDQA X5, X3
	VMOVDQA X7, X2
	VMOVDQA X8, X1
	VMOVDQA X9, X0

loop:
	// Plaintext XOR previous ciphertext.
	LOAD_WORDS(16)
	VPXOR   X3, X5, X5
	VPXOR   X2, X7, X7
	VPXOR   X1, X8, X8
	VPXOR   X0, X9, X9
	VMOVDQA X5, X0
	VMOVDQA X7, X1
	VMOVDQA X8, X2
	VMOVDQA X9, X3
	// x[0]
	VPXOR 0(DI), X1, X4
	VPXOR X2, X4, X4
	VPXOR X3, X4, X4

	FOUR_ROUNDS(16)
	FOUR_ROUNDS(80)
	FOUR_ROUNDS(144)
	FOUR_ROUNDS(208)
	FOUR_ROUNDS(272)
	FOUR_ROUNDS(336)
	FOUR_ROUNDS(400)
	FOUR_ROUNDS(464)

	// Ciphertext words 0-3 are Y[35], Y[34], Y[33], Y[32].
	VMOVDQA X3, X4
	VMOVDQA X2, X5
	VMOVDQA X1, X6
	VMOVDQA X0, X7
	IMAGE(KEY_OUT_LO, KEY_OUT_HI, X4)
	IMAGE(KEY_OUT_LO, KEY_OUT_HI, X5)
	IMAGE(KEY_OUT_LO, KEY_OUT_HI, X6)
	IMAGE(KEY_OUT_LO, KEY_OUT_HI, X7)
	TRANSPOSE(X4, X5, X6, X7, X8, X9)
	VMOVDQU X5, 16(R8)
	VMOVDQU X7, 16(R9)
	VMOVDQU X8, 16(R10)
	VMOVDQU X9, 16(R11)

	ADDQ AX, R8
	ADDQ BX, R9
	ADDQ CX, R10
	ADDQ DX, R11
	DECQ SI
	JNZ  loop

	VZEROUPPER

done:
	RET

// SBOX leaves in X4 the S-box of every byte of X4, its bytes moved as
// AESENCLAST's ShiftRows moves them. X6 and X7 are clobbered.
#define SBOX \
	VPSRLQ      $4, X4, X6  \
	VPAND       X10, X4, X7 \
	VPAND       X10, X6, X6 \
	VPSHUFB     X7, X11, X7 \
	VPSHUFB     X6, X12, X6 \
	VPXOR       X6, X7, X4  \
	VAESENCLAST KEY_ZERO(DI), X4, X4 \
	VPSRLQ      $4, X4, X6  \
	VPAND       X10, X4, X7 \
	VPAND       X10, X6, X6 \
	VPSHUFB     X7, X13, X7 \
	VPSHUFB     X6, X14, X6 \
	VPXOR       X6, X7, X4

// func sboxAESNI(k *aesniKey, b *[16]byte)
// applies the S-box to each byte of b in place.
TEXT ·sboxAESNI(SB), NOSPLIT, $0-16
	MOVQ k+0(FP), DI
	MOVQ b+8(FP), SI
	VMOVDQU KEY_MASK(DI), X10
	VMOVDQU KEY_PRE_LO(DI), X11
	VMOVDQU KEY_PRE_HI(DI), X12
	VMOVDQU KEY_POST_LO(DI), X13
	VMOVDQU KEY_POST_HI(DI), X14
	VMOVDQU 0(SI), X4
	SBOX
	VPSHUFB KEY_ROT0(DI), X4, X4
	VMOVDQU X4, 0(SI)
	VZEROUPPER
	RET

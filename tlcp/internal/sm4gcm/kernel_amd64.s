//go:build !purego

#include "textflag.h"

// SM4 in counter mode on sixteen blocks at once, and GHASH four blocks per
// VPCLMULQDQ, for CPUs with AVX-512 (F, VL, BW), GFNI and VPCLMULQDQ.
//
// Counter mode keeps the cipher state as package sm4cbc's vector code
// does: register Zk holds word k of sixteen blocks, one per 32-bit lane,
// each byte in the image of the matrix in (see sm4cbc/gf.go). A round is
// four affine inversions (one per byte rotation of the linear transform),
// three rotations and three XORs for all sixteen blocks. Lane 4j+i (j the
// 128-bit chunk, i the word in it) carries block 4i+j of the batch, so
// that after a 4×4 transposition within each chunk, register c holds
// blocks 4c to 4c+3: 64 bytes in order.
//
// GHASH keeps its accumulator byte-reflected and multiplies by powers of
// H·x (the key struct's hpow, H^16·x first), so that a product followed by
// two folds by the polynomial's constant 0xC2…01 is the field product.
// Sixteen blocks are multiplied by H^16…H^1 and summed before one
// reduction.

// Offsets in kernelKey (kernel_amd64.go checks them).
#define KEY_RK 0
#define KEY_IN 144
#define KEY_OUT 152
#define KEY_ROUND 160
#define KEY_INC 192
#define KEY_BSWAP32 256
#define KEY_BSWAP 272
#define KEY_POLY 288
#define KEY_SIXTEEN 304
#define KEY_HPOW 320

// ROUND runs round j with A=Y[j], B=Y[j+1], C=Y[j+2], D=Y[j+3] and x[j]
// in Z4; it leaves Y[j+4] in A and x[j+1] in Z4. rk is the offset of
// round key j+1.
#define ROUND(rk, A, B, C, D) \
	VGF2P8AFFINEINVQB $0, Z11, Z4, Z7 \
	VGF2P8AFFINEINVQB $0, Z12, Z4, Z8 \
	VGF2P8AFFINEINVQB $0, Z13, Z4, Z9 \
	VGF2P8AFFINEINVQB $0, Z10, Z4, Z6 \
	VPXORD.BCST       rk(DI), C, Z5   \
	VPXORD            D, Z5, Z5       \
	VPXORD            A, Z5, Z4       \
	VPROLD            $8, Z7, Z7      \
	VPROLD            $16, Z8, Z8     \
	VPROLD            $24, Z9, Z9     \
	VPTERNLOGD        $0x96, Z7, Z6, Z4 \
	VPTERNLOGD        $0x96, Z9, Z8, Z4 \
	VPXORD            Z4, Z5, A

#define FOUR_ROUNDS(rk) \
	ROUND(rk, Z0, Z1, Z2, Z3)   \
	ROUND(rk+4, Z1, Z2, Z3, Z0) \
	ROUND(rk+8, Z2, Z3, Z0, Z1) \
	ROUND(rk+12, Z3, Z0, Z1, Z2)

// ROUND2 is ROUND on two sets of sixteen blocks side by side: the second
// set's state is E, F, G, H, its x in Z20, its scratch Z21-Z25.
#define ROUND2(rk, A, B, C, D, E, F, G, H) \
	VGF2P8AFFINEINVQB $0, Z11, Z4, Z7   \
	VGF2P8AFFINEINVQB $0, Z11, Z20, Z23 \
	VGF2P8AFFINEINVQB $0, Z12, Z4, Z8   \
	VGF2P8AFFINEINVQB $0, Z12, Z20, Z24 \
	VGF2P8AFFINEINVQB $0, Z13, Z4, Z9   \
	VGF2P8AFFINEINVQB $0, Z13, Z20, Z25 \
	VGF2P8AFFINEINVQB $0, Z10, Z4, Z6   \
	VGF2P8AFFINEINVQB $0, Z10, Z20, Z22 \
	VPXORD.BCST       rk(DI), C, Z5     \
	VPXORD.BCST       rk(DI), G, Z21    \
	VPXORD            D, Z5, Z5         \
	VPXORD            H, Z21, Z21       \
	VPXORD            A, Z5, Z4         \
	VPXORD            E, Z21, Z20       \
	VPROLD            $8, Z7, Z7        \
	VPROLD            $8, Z23, Z23      \
	VPROLD            $16, Z8, Z8       \
	VPROLD            $16, Z24, Z24     \
	VPROLD            $24, Z9, Z9       \
	VPROLD            $24, Z25, Z25     \
	VPTERNLOGD        $0x96, Z7, Z6, Z4 \
	VPTERNLOGD        $0x96, Z23, Z22, Z20 \
	VPTERNLOGD        $0x96, Z9, Z8, Z4 \
	VPTERNLOGD        $0x96, Z25, Z24, Z20 \
	VPXORD            Z4, Z5, A         \
	VPXORD            Z20, Z21, E

#define FOUR_ROUNDS2(rk) \
	ROUND2(rk, Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)   \
	ROUND2(rk+4, Z1, Z2, Z3, Z0, Z17, Z18, Z19, Z16) \
	ROUND2(rk+8, Z2, Z3, Z0, Z1, Z18, Z19, Z16, Z17) \
	ROUND2(rk+12, Z3, Z0, Z1, Z2, Z19, Z16, Z17, Z18)

// TRANSPOSE transposes the 4×4 words of each 128-bit chunk of a, b, c, d
// into b, d, t0, t1; a and c are clobbered.
#define TRANSPOSE(a, b, c, d, t0, t1) \
	VPUNPCKLDQ  b, a, t0  \
	VPUNPCKHDQ  b, a, a   \
	VPUNPCKLDQ  d, c, t1  \
	VPUNPCKHDQ  d, c, c   \
	VPUNPCKLQDQ t1, t0, b \
	VPUNPCKHQDQ t1, t0, d \
	VPUNPCKLQDQ c, a, t0  \
	VPUNPCKHQDQ c, a, t1

// func ctrBlocks(k *kernelKey, nonce *[12]byte, ctr uint32, dst, src *byte, n int)
TEXT ·ctrBlocks(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), DI
	MOVQ nonce+8(FP), R8
	MOVL ctr+16(FP), AX
	MOVQ dst+24(FP), DX
	MOVQ src+32(FP), SI
	MOVQ n+40(FP), CX
	TESTQ CX, CX
	JZ   ctrDone

	VPBROADCASTQ KEY_ROUND(DI), Z10
	VPBROADCASTQ KEY_ROUND+8(DI), Z11
	VPBROADCASTQ KEY_ROUND+16(DI), Z12
	VPBROADCASTQ KEY_ROUND+24(DI), Z13
	VPBROADCASTQ KEY_IN(DI), Z14
	VPBROADCASTQ KEY_OUT(DI), Z15
	VMOVDQU32    KEY_INC(DI), Z27
	VPBROADCASTD KEY_SIXTEEN(DI), Z26
	VBROADCASTI32X4 KEY_BSWAP32(DI), Z28
	// The nonce's words, in the state's image: the same in every block.
	VPBROADCASTD 0(R8), Z29
	VPBROADCASTD 4(R8), Z30
	VPBROADCASTD 8(R8), Z31
	VGF2P8AFFINEQB $0, Z14, Z29, Z29
	VGF2P8AFFINEQB $0, Z14, Z30, Z30
	VGF2P8AFFINEQB $0, Z14, Z31, Z31

	// Two batches at a time: their rounds interleave, so that one
	// batch's affine inversions run while the other's wait.
	CMPQ CX, $2
	JB   ctrSingle

ctrPairLoop:
	// Counters: lane 4j+i of the first batch at ctr+4i+j, the second
	// batch sixteen on.
	VPBROADCASTD   AX, Z3
	VPADDD         Z27, Z3, Z3
	VPADDD         Z26, Z3, Z19
	VPSHUFB        Z28, Z3, Z3
	VPSHUFB        Z28, Z19, Z19
	VGF2P8AFFINEQB $0, Z14, Z3, Z3
	VGF2P8AFFINEQB $0, Z14, Z19, Z19
	ADDL           $32, AX
	VMOVDQA64      Z29, Z0
	VMOVDQA64      Z30, Z1
	VMOVDQA64      Z31, Z2
	VMOVDQA64      Z29, Z16
	VMOVDQA64      Z30, Z17
	VMOVDQA64      Z31, Z18
	// x[0] of each: rk[0] ^ words 1 and 2 are common.
	VPXORD.BCST    KEY_RK(DI), Z1, Z4
	VPXORD         Z2, Z4, Z4
	VPXORD         Z19, Z4, Z20
	VPXORD         Z3, Z4, Z4

	FOUR_ROUNDS2(4)
	FOUR_ROUNDS2(20)
	FOUR_ROUNDS2(36)
	FOUR_ROUNDS2(52)
	FOUR_ROUNDS2(68)
	FOUR_ROUNDS2(84)
	FOUR_ROUNDS2(100)
	FOUR_ROUNDS2(116)

	VGF2P8AFFINEQB $0, Z15, Z3, Z4
	VGF2P8AFFINEQB $0, Z15, Z2, Z5
	VGF2P8AFFINEQB $0, Z15, Z1, Z6
	VGF2P8AFFINEQB $0, Z15, Z0, Z7
	TRANSPOSE(Z4, Z5, Z6, Z7, Z8, Z9)
	VPXORD    0(SI), Z5, Z5
	VPXORD    64(SI), Z7, Z7
	VPXORD    128(SI), Z8, Z8
	VPXORD    192(SI), Z9, Z9
	VMOVDQU64 Z5, 0(DX)
	VMOVDQU64 Z7, 64(DX)
	VMOVDQU64 Z8, 128(DX)
	VMOVDQU64 Z9, 192(DX)
	VGF2P8AFFINEQB $0, Z15, Z19, Z20
	VGF2P8AFFINEQB $0, Z15, Z18, Z21
	VGF2P8AFFINEQB $0, Z15, Z17, Z22
	VGF2P8AFFINEQB $0, Z15, Z16, Z23
	TRANSPOSE(Z20, Z21, Z22, Z23, Z24, Z25)
	VPXORD    256(SI), Z21, Z21
	VPXORD    320(SI), Z23, Z23
	VPXORD    384(SI), Z24, Z24
	VPXORD    448(SI), Z25, Z25
	VMOVDQU64 Z21, 256(DX)
	VMOVDQU64 Z23, 320(DX)
	VMOVDQU64 Z24, 384(DX)
	VMOVDQU64 Z25, 448(DX)

	ADDQ $512, SI
	ADDQ $512, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JAE  ctrPairLoop
	TESTQ CX, CX
	JZ   ctrEnd

ctrSingle:
	VPBROADCASTD   AX, Z3
	VPADDD         Z27, Z3, Z3
	VPSHUFB        Z28, Z3, Z3
	VGF2P8AFFINEQB $0, Z14, Z3, Z3
	ADDL           $16, AX
	VMOVDQA64      Z29, Z0
	VMOVDQA64      Z30, Z1
	VMOVDQA64      Z31, Z2
	// x[0]
	VPXORD.BCST    KEY_RK(DI), Z1, Z4
	VPTERNLOGD     $0x96, Z3, Z2, Z4

	FOUR_ROUNDS(4)
	FOUR_ROUNDS(20)
	FOUR_ROUNDS(36)
	FOUR_ROUNDS(52)
	FOUR_ROUNDS(68)
	FOUR_ROUNDS(84)
	FOUR_ROUNDS(100)
	FOUR_ROUNDS(116)

	// Keystream words 0-3 are Y[35], Y[34], Y[33], Y[32].
	VGF2P8AFFINEQB $0, Z15, Z3, Z22
	VGF2P8AFFINEQB $0, Z15, Z2, Z23
	VGF2P8AFFINEQB $0, Z15, Z1, Z24
	VGF2P8AFFINEQB $0, Z15, Z0, Z25
	TRANSPOSE(Z22, Z23, Z24, Z25, Z16, Z17)
	VPXORD    0(SI), Z23, Z23
	VPXORD    64(SI), Z25, Z25
	VPXORD    128(SI), Z16, Z16
	VPXORD    192(SI), Z17, Z17
	VMOVDQU64 Z23, 0(DX)
	VMOVDQU64 Z25, 64(DX)
	VMOVDQU64 Z16, 128(DX)
	VMOVDQU64 Z17, 192(DX)

	ADDQ $256, SI
	ADDQ $256, DX
	DECQ CX
	JNZ  ctrSingle

ctrEnd:
	VZEROUPPER

ctrDone:
	RET

// REDUCE folds the 256-bit product HI:LO (X10:X9) into X0, with the
// polynomial constant in X14; X12 is clobbered.
#define REDUCE \
	VPCLMULQDQ $0x01, X9, X14, X12 \
	VPSHUFD    $0x4e, X9, X9       \
	VPXOR      X12, X9, X9         \
	VPCLMULQDQ $0x01, X9, X14, X12 \
	VPSHUFD    $0x4e, X9, X9       \
	VPXOR      X12, X9, X9         \
	VPXOR      X10, X9, X0

// MUL4 multiplies the four blocks of D by those of H and adds the partial
// products to LO, HI and MID (Z9, Z10, Z11).
#define MUL4(D, H) \
	VPCLMULQDQ $0x00, H, D, Z16 \
	VPCLMULQDQ $0x11, H, D, Z17 \
	VPCLMULQDQ $0x01, H, D, Z18 \
	VPCLMULQDQ $0x10, H, D, Z19 \
	VPXORQ     Z16, Z9, Z9      \
	VPXORQ     Z17, Z10, Z10    \
	VPTERNLOGQ $0x96, Z19, Z18, Z11

// func ghashBlocks(k *kernelKey, acc *[16]byte, data *byte, n int)
TEXT ·ghashBlocks(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), DI
	MOVQ acc+8(FP), BX
	MOVQ data+16(FP), SI
	MOVQ n+24(FP), CX

	VMOVDQU (BX), X0
	VMOVDQU KEY_POLY(DI), X14
	VBROADCASTI32X4 KEY_BSWAP(DI), Z15

	CMPQ CX, $16
	JB   ghashSingles
	VMOVDQU64 KEY_HPOW(DI), Z5
	VMOVDQU64 KEY_HPOW+64(DI), Z6
	VMOVDQU64 KEY_HPOW+128(DI), Z7
	VMOVDQU64 KEY_HPOW+192(DI), Z8

ghashLoop:
	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPSHUFB   Z15, Z1, Z1
	VPSHUFB   Z15, Z2, Z2
	VPSHUFB   Z15, Z3, Z3
	VPSHUFB   Z15, Z4, Z4
	// The accumulator (upper lanes zero) joins the first block.
	VPXORQ    Z0, Z1, Z1
	VPXORQ    Z9, Z9, Z9
	VPXORQ    Z10, Z10, Z10
	VPXORQ    Z11, Z11, Z11
	MUL4(Z1, Z5)
	MUL4(Z2, Z6)
	MUL4(Z3, Z7)
	MUL4(Z4, Z8)
	// The middle products move half into LO, half into HI.
	VPSLLDQ   $8, Z11, Z12
	VPSRLDQ   $8, Z11, Z11
	VPXORQ    Z12, Z9, Z9
	VPXORQ    Z11, Z10, Z10
	// Sum the four chunks.
	VEXTRACTI64X4 $1, Z9, Y12
	VEXTRACTI64X4 $1, Z10, Y13
	VPXORQ        Y12, Y9, Y9
	VPXORQ        Y13, Y10, Y10
	VEXTRACTI128  $1, Y9, X12
	VEXTRACTI128  $1, Y10, X13
	VPXOR         X12, X9, X9
	VPXOR         X13, X10, X10
	REDUCE

	ADDQ $256, SI
	SUBQ $16, CX
	CMPQ CX, $16
	JAE  ghashLoop

ghashSingles:
	TESTQ CX, CX
	JZ    ghashDone
	VMOVDQU KEY_HPOW+240(DI), X5

ghashSingle:
	VMOVDQU    (SI), X1
	VPSHUFB    X15, X1, X1
	VPXOR      X0, X1, X1
	VPCLMULQDQ $0x00, X5, X1, X9
	VPCLMULQDQ $0x11, X5, X1, X10
	VPCLMULQDQ $0x01, X5, X1, X11
	VPCLMULQDQ $0x10, X5, X1, X12
	VPXOR      X12, X11, X11
	VPSLLDQ    $8, X11, X12
	VPSRLDQ    $8, X11, X11
	VPXOR      X12, X9, X9
	VPXOR      X11, X10, X10
	REDUCE
	ADDQ $16, SI
	DECQ CX
	JNZ  ghashSingle

ghashDone:
	VMOVDQU X0, (BX)
	VZEROUPPER
	RET

// func mulField(poly, a, b *[16]byte)
// a = a·b/x, in GHASH's byte-reflected representation.
TEXT ·mulField(SB), NOSPLIT, $0-24
	MOVQ poly+0(FP), DI
	MOVQ a+8(FP), BX
	MOVQ b+16(FP), SI
	VMOVDQU    (DI), X14
	VMOVDQU    (BX), X1
	VMOVDQU    (SI), X5
	VPCLMULQDQ $0x00, X5, X1, X9
	VPCLMULQDQ $0x11, X5, X1, X10
	VPCLMULQDQ $0x01, X5, X1, X11
	VPCLMULQDQ $0x10, X5, X1, X12
	VPXOR      X12, X11, X11
	VPSLLDQ    $8, X11, X12
	VPSRLDQ    $8, X11, X11
	VPXOR      X12, X9, X9
	VPXOR      X11, X10, X10
	REDUCE
	VMOVDQU X0, (BX)
	RET

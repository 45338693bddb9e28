//go:build !purego

#include "textflag.h"

// SM4-CBC encryption of four chains at once, one per 32-bit lane of the
// XMM registers. Register Xk holds word k of the current block of all four
// chains. The state is kept in the image of the matrix laneKey.in applied
// to every byte (see gf.go), so that a round is:
//
//	x      = Y[j+1] ^ Y[j+2] ^ Y[j+3] ^ rk[j]             (one lane word)
//	Y[j+4] = Y[j] ^ B0·inv(x) ^ rol8(B1·inv(x)) ^ rol16(B2·inv(x)) ^ rol24(B3·inv(x))
//
// with one GF2P8AFFINEINVQB per matrix B_o. The four affine inversions
// run side by side, so the chain from one round's x to the next is one
// affine inversion, one rotation and two three-way XORs. The next round's
// x is computed directly as
//
//	x[j+1] = (Y[j+2] ^ Y[j+3] ^ rk[j+1] ^ Y[j]) ^ T
//
// whose first part is known early; Y[j+4] = x[j+1] ^ Y[j+2] ^ Y[j+3] ^
// rk[j+1] follows off the critical path.
//
// Registers:
//	DI        laneKey
//	R8-R11    lane pointers (IV, then the current ciphertext block)
//	AX,BX,CX,DX  lane steps (16, or 0 for an idle lane)
//	K1-K4     lane store masks (none for an idle lane)
//	SI        blocks left
//	X0-X3     state words (rotating roles)
//	X4        x; X5 Y[j+2]^Y[j+3]^rk[j+1]; X6-X9 the affine inversions
//	X10-X13   B0-B3; X14 in, X15 out
//	X16-X21   loads, stores, transposition
//	X22-X25   the next plaintext block

#define KEY_IN 528
#define KEY_OUT 544
#define KEY_ROUND 560

// ROUND runs round j with state A=Y[j], B=Y[j+1], C=Y[j+2], D=Y[j+3] and
// x in X4; it leaves Y[j+4] in A and x[j+1] in X4. rk is the offset of
// round key j+1.
#define ROUND(rk, A, B, C, D) \
	VGF2P8AFFINEINVQB $0, X11, X4, X7 \
	VGF2P8AFFINEINVQB $0, X12, X4, X8 \
	VGF2P8AFFINEINVQB $0, X13, X4, X9 \
	VGF2P8AFFINEINVQB $0, X10, X4, X6 \
	VPXOR             rk(DI), C, X5   \
	VPXOR             D, X5, X5       \
	VPXOR             A, X5, X4       \
	VPROLD            $8, X7, X7      \
	VPROLD            $16, X8, X8     \
	VPROLD            $24, X9, X9     \
	VPTERNLOGD        $0x96, X7, X6, X4 \
	VPTERNLOGD        $0x96, X9, X8, X4 \
	VPXOR             X4, X5, A

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

// LOAD_WORDS loads the block at off from each lane pointer and leaves its
// words, in the state's image, in X17 (word 0), X19, X20, X21 (word 3).
#define LOAD_WORDS(off) \
	VMOVDQU32 off(R8), X16  \
	VMOVDQU32 off(R9), X17  \
	VMOVDQU32 off(R10), X18 \
	VMOVDQU32 off(R11), X19 \
	TRANSPOSE(X16, X17, X18, X19, X20, X21) \
	VGF2P8AFFINEQB $0, X14, X17, X17 \
	VGF2P8AFFINEQB $0, X14, X19, X19 \
	VGF2P8AFFINEQB $0, X14, X20, X20 \
	VGF2P8AFFINEQB $0, X14, X21, X21

// KEEP_PLAINTEXT moves the words LOAD_WORDS left to X22-X25.
#define KEEP_PLAINTEXT \
	VMOVDQA32 X17, X22 \
	VMOVDQA32 X19, X23 \
	VMOVDQA32 X20, X24 \
	VMOVDQA32 X21, X25

// func encryptLanes(k *laneKey, ptr *[4]*byte, step *[4]uintptr, store uint64, n int)
TEXT ·encryptLanes(SB), NOSPLIT, $0-40
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
	// Lane l stores its ciphertext under the mask in bits 16l-16l+15.
	MOVQ store+24(FP), SI
	KMOVW SI, K1
	SHRQ $16, SI
	KMOVW SI, K2
	SHRQ $16, SI
	KMOVW SI, K3
	SHRQ $16, SI
	KMOVW SI, K4
	MOVQ n+32(FP), SI
	TESTQ SI, SI
	JZ   done

	VMOVDQU KEY_IN(DI), X14
	VMOVDQU KEY_OUT(DI), X15
	VMOVDQU KEY_ROUND(DI), X10
	VMOVDQU KEY_ROUND+16(DI), X11
	VMOVDQU KEY_ROUND+32(DI), X12
	VMOVDQU KEY_ROUND+48(DI), X13

	// The IVs stand for the previous ciphertext block, whose words 0-3
	// the rounds leave in X3, X2, X1, X0.
	LOAD_WORDS(0)
	VMOVDQA32 X17, X3
	VMOVDQA32 X19, X2
	VMOVDQA32 X20, X1
	VMOVDQA32 X21, X0
	LOAD_WORDS(16)
	KEEP_PLAINTEXT

loop:
	// Plaintext XOR previous ciphertext, in the state's image.
	VPXORD X3, X22, X16
	VPXORD X2, X23, X17
	VPXORD X1, X24, X18
	VPXORD X0, X25, X19
	VMOVDQA32 X16, X0
	VMOVDQA32 X17, X1
	VMOVDQA32 X18, X2
	VMOVDQA32 X19, X3
	// x[0]
	VPXOR      0(DI), X1, X4
	VPTERNLOGD $0x96, X3, X2, X4

	// The next plaintext block is loaded before this block's ciphertext
	// is stored: an idle lane loads and (masked off) stores at one
	// address, and a load after the store would wait for it.
	CMPQ SI, $1
	JEQ  last
	LOAD_WORDS(32)
	KEEP_PLAINTEXT
last:

	FOUR_ROUNDS(16)
	FOUR_ROUNDS(80)
	FOUR_ROUNDS(144)
	FOUR_ROUNDS(208)
	FOUR_ROUNDS(272)
	FOUR_ROUNDS(336)
	FOUR_ROUNDS(400)
	FOUR_ROUNDS(464)

	// Ciphertext words 0-3 are Y[35], Y[34], Y[33], Y[32].
	VGF2P8AFFINEQB $0, X15, X3, X16
	VGF2P8AFFINEQB $0, X15, X2, X17
	VGF2P8AFFINEQB $0, X15, X1, X18
	VGF2P8AFFINEQB $0, X15, X0, X19
	TRANSPOSE(X16, X17, X18, X19, X20, X21)
	VMOVDQU32 X17, K1, 16(R8)
	VMOVDQU32 X19, K2, 16(R9)
	VMOVDQU32 X20, K3, 16(R10)
	VMOVDQU32 X21, K4, 16(R11)

	ADDQ AX, R8
	ADDQ BX, R9
	ADDQ CX, R10
	ADDQ DX, R11
	DECQ SI
	JNZ  loop

	VZEROUPPER

done:
	RET

//go:build !purego

package sm4cbc

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveLanes is true when the CPU (and the OS, for the AVX-512 state) can
// run kernel_amd64.s: GFNI, with AVX-512 for 128-bit rotations and
// three-way XORs.
var haveLanes = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512GFNI

// encryptLanes encrypts n blocks of four CBC chains in place. Lane l's IV
// is the block at ptr[l], its plaintext follows; after each block the lane
// moves on by step[l] bytes. Each lane's last ciphertext block ends where
// the IV of a following call would be. Bits 16l to 16l+15 of store mask
// lane l's stores (0xf: all four words, 0: none, for an idle lane).
//
//go:noescape
func encryptLanes(k *laneKey, ptr *[lanes]*byte, step *[lanes]uintptr, store uint64, n int)

// haveBlocks is true when gmsm's multi-block SM4 is assembly (AES-NI).
const haveBlocks = true

// haveAESNI is true when the CPU runs aesni_amd64.s: AES-NI and AVX.
var haveAESNI = cpu.X86.HasAES && cpu.X86.HasAVX

// encryptLanesAESNI encrypts n blocks of four CBC chains in place, as
// encryptLanes does; an idle lane reads and writes its own scratch block.
//
//go:noescape
func encryptLanesAESNI(k *aesniKey, ptr *[lanes]*byte, step *[lanes]uintptr, n int)

// sboxAESNI applies the S-box to each byte of b.
//
//go:noescape
func sboxAESNI(k *aesniKey, b *[16]byte)

// expandKeyGFNI writes the 33 vector round keys of a key (those of
// vectorRoundKeys) to out, with GFNI; for CPUs where haveLanes.
//
//go:noescape
func expandKeyGFNI(c *gfniKeyConsts, key *[16]byte, out *[33]uint32)

// Ensure the layout keygfni_amd64.s relies on.
var _ [48]struct{} = [unsafe.Offsetof(gfniKeyConsts{}.fk)]struct{}{}
var _ [192]struct{} = [unsafe.Offsetof(gfniKeyConsts{}.offs)]struct{}{}

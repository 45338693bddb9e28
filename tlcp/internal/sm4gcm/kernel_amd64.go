//go:build !purego

package sm4gcm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveKernel is true when the CPU (and the OS, for the AVX-512 state)
// runs kernel_amd64.s.
var haveKernel = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512GFNI && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX

// ctrBlocks XORs n batches of sixteen keystream blocks into src, writing
// dst: the counter blocks are nonce || ctr, nonce || ctr+1, ….
//
//go:noescape
func ctrBlocks(k *kernelKey, nonce *[12]byte, ctr uint32, dst, src *byte, n int)

// ctrBlocks64 XORs n batches of 64 keystream blocks into src, writing
// dst; nonce is the image of the nonce's bytes (see wide64_amd64.s).
//
//go:noescape
func ctrBlocks64(k *kernelKey, nonce *[12]uint32, ctr uint32, dst, src *byte, n int)

// ghashBlocks adds n blocks of data to the GHASH accumulator acc.
//
//go:noescape
func ghashBlocks(k *kernelKey, acc *[16]byte, data *byte, n int)

// mulField sets a to a·b/x in GHASH's field, both byte-reflected.
//
//go:noescape
func mulField(poly, a, b *[16]byte)

// Ensure the layout kernel_amd64.s relies on.
var _ [144]struct{} = [unsafe.Offsetof(kernelKey{}.in)]struct{}{}
var _ [192]struct{} = [unsafe.Offsetof(kernelKey{}.inc)]struct{}{}
var _ [288]struct{} = [unsafe.Offsetof(kernelKey{}.poly)]struct{}{}
var _ [304]struct{} = [unsafe.Offsetof(kernelKey{}.sixteen)]struct{}{}
var _ [320]struct{} = [unsafe.Offsetof(kernelKey{}.hpow)]struct{}{}
var _ [576]struct{} = [unsafe.Offsetof(kernelKey{}.rkb)]struct{}{}
var _ [1104]struct{} = [unsafe.Offsetof(kernelKey{}.iota)]struct{}{}
var _ [1168]struct{} = [unsafe.Offsetof(kernelKey{}.ones)]struct{}{}

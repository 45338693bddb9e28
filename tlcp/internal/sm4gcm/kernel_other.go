//go:build !amd64 || purego

package sm4gcm

const haveKernel = false

func ctrBlocks(k *kernelKey, nonce *[12]byte, ctr uint32, dst, src *byte, n int) {
	panic("sm4gcm: no kernel on this platform")
}

func ghashBlocks(k *kernelKey, acc *[16]byte, data *byte, n int) {
	panic("sm4gcm: no kernel on this platform")
}

func mulField(poly, a, b *[16]byte) { panic("sm4gcm: no kernel on this platform") }

func ctrBlocks64(k *kernelKey, nonce *[12]uint32, ctr uint32, dst, src *byte, n int) {
	panic("sm4gcm: no kernel on this platform")
}

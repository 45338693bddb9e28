package sm4gcm

import "testing"

// BenchmarkParts measures the kernel's pieces on 16 KiB: counter mode
// sixteen and 64 blocks at a time, and GHASH.
func BenchmarkParts(b *testing.B) {
	if !haveKernel {
		b.Skip()
	}
	g := newWide(make([]byte, 16))
	buf := make([]byte, 16384)
	var nonce [12]byte
	b.Run("ctr", func(b *testing.B) {
		b.SetBytes(16384)
		for i := 0; i < b.N; i++ {
			ctrBlocks(&g.k, &nonce, 1, &buf[0], &buf[0], 64)
		}
	})
	b.Run("ctr64", func(b *testing.B) {
		b.SetBytes(16384)
		var img [12]uint32
		for i := 0; i < b.N; i++ {
			ctrBlocks64(&g.k, &img, 1, &buf[0], &buf[0], 16)
		}
	})
	b.Run("ghash", func(b *testing.B) {
		b.SetBytes(16384)
		var acc [16]byte
		for i := 0; i < b.N; i++ {
			ghashBlocks(&g.k, &acc, &buf[0], 1024)
		}
	})
}

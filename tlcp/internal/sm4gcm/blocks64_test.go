package sm4gcm

import (
	"bytes"
	"testing"
)

// TestBlocks64 checks the byte-sliced kernel against the sixteen-block one
// for counters whose bytes carry into the next within a batch, up to the
// 32-bit wrap-around.
func TestBlocks64(t *testing.T) {
	if !haveKernel {
		t.Skip("no kernel on this CPU")
	}
	g := newWide([]byte("0123456789abcdef"))
	var nonce [12]byte
	copy(nonce[:], "nonce-nonce-")
	// image, which comes before every use of ctrBlocks64, also sets
	// the byte round keys it reads.
	s := stream{nonce: &nonce}
	g.image(&s)
	img := s.img
	src := make([]byte, 2048)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, start := range []uint32{0, 5, 0xc0, 0xf0, 0x1ff, 0xffe0, 0x00ffffd0, 0x01fffff1, 0xffffffc0, 0xfffffff1} {
		want := make([]byte, len(src))
		got := make([]byte, len(src))
		ctrBlocks(&g.k, &nonce, start, &want[0], &src[0], 8)
		ctrBlocks64(&g.k, &img, start, &got[0], &src[0], 2)
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("counter %#x: block %d differs", start, i/16)
					break
				}
			}
		}
	}
}

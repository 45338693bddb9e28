//go:build !amd64 || purego

package sm4cbc

const haveLanes = false

func encryptLanes(k *laneKey, ptr *[lanes]*byte, step *[lanes]uintptr, store uint64, n int) {
	panic("sm4cbc: no vector code on this platform")
}

const haveAESNI = false

func encryptLanesAESNI(k *aesniKey, ptr *[lanes]*byte, step *[lanes]uintptr, n int) {
	panic("sm4cbc: no AES-NI code on this platform")
}

func sboxAESNI(k *aesniKey, b *[16]byte) {
	panic("sm4cbc: no AES-NI code on this platform")
}

func expandKeyGFNI(c *gfniKeyConsts, key *[16]byte, out *[33]uint32) {
	panic("sm4cbc: no GFNI code on this platform")
}

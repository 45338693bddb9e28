//go:build !amd64 || purego

package sm4cbc

const haveLanes = false

func encryptLanes(k *laneKey, ptr *[lanes]*byte, step *[lanes]uintptr, store uint64, n int) {
	panic("sm4cbc: no vector code on this platform")
}

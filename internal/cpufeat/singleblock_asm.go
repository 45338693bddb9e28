//go:build (amd64 || arm64) && !purego

package cpufeat

import _ "unsafe" // go:linkname

// gmsm (internal/sm4/cipher_asm.go) encrypts single SM4 blocks with its
// Go code, S-box lookup tables indexed by key- and data-dependent bytes,
// unless FORCE_SM4BLOCK_AESNI=1 was set when the process started; its
// multi-block code always uses the AES instructions. The single-block
// path serves GCM's hash key and tag mask, CBC encryption through
// cipher.NewCBCEncrypter, CMAC, and every cipher.Block.Encrypt. The
// variable below is that switch; it is read on every block, so setting
// it after start-up takes effect at once.
//
//go:linkname gmsmSingleBlockAsm github.com/emmansun/gmsm/internal/sm4.useAESNI4SingleBlock
var gmsmSingleBlockAsm bool

// SetSingleBlockAsm turns gmsm's single-block SM4 code with the AES
// instructions on or off and returns the previous setting. Current turns
// it on where the plan says so; benchmarks turn it off to compare. It must
// not be called while SM4 is in use on other goroutines.
func SetSingleBlockAsm(on bool) (was bool) {
	was = gmsmSingleBlockAsm
	gmsmSingleBlockAsm = on
	return was
}

// SingleBlockAsm reports the current setting.
func SingleBlockAsm() bool { return gmsmSingleBlockAsm }

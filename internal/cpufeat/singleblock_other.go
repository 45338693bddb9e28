//go:build !(amd64 || arm64) || purego

package cpufeat

// SetSingleBlockAsm does nothing here: gmsm has no single-block SM4
// assembly for this build.
func SetSingleBlockAsm(on bool) (was bool) { return false }

// SingleBlockAsm reports false: gmsm has no single-block SM4 assembly
// for this build.
func SingleBlockAsm() bool { return false }

//go:build !(amd64 || arm64) || purego

package sm4cbc

// haveBlocks is false: gmsm's multi-block SM4 has no constant-time
// assembly for this build.
const haveBlocks = false

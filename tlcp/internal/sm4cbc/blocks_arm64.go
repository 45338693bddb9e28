//go:build arm64 && !purego

package sm4cbc

// haveBlocks is true: gmsm's multi-block SM4 is assembly (ARMv8 AES or SM4
// instructions).
const haveBlocks = true

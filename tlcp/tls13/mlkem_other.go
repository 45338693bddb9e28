//go:build !arm64 || purego

package tls13

// mlkemUsable: gmsm's ML-KEM runs on every CPU of these builds (see
// mlkem_arm64.go for the one that needs a check).
const mlkemUsable = true

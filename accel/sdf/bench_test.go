//go:build cgo

package sdf_test

import (
	"crypto"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/accel/sdf"
	"github.com/gmgate/gmgate/internal/softsdf"
	"github.com/gmgate/gmgate/tlcp"
)

// The benchmarks compare, for SM2 signing and decryption:
//
//	software        gmsm in Go (accel's file: backend)
//	sdf             the sdf backend: host-side SM3(Z||M), session pool,
//	                cgo, softsdf's bookkeeping, OpenSSL
//	sdf-from-c      SDF_InternalSign_ECC / SDF_InternalDecrypt_ECC called
//	                in a C loop: softsdf's bookkeeping and OpenSSL
//	openssl-direct  OpenSSL's EVP_PKEY_sign / EVP_PKEY_decrypt in a C loop
//
// so sdf minus sdf-from-c is the cost of the Go side (pool hand-off, cgo,
// SM3 of Z and the message, DER), and sdf-from-c minus openssl-direct that
// of the software device.

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

func BenchmarkSign(b *testing.B) {
	msg := make([]byte, 600) // about the size of a ServerKeyExchange's signed part
	rand.Read(msg)
	b.Run("software", func(b *testing.B) {
		benchSign(b, softwareKey(b), msg)
	})
	for _, lock := range []string{"true", "false"} {
		b.Run("sdf/lock-thread="+lock, func(b *testing.B) {
			_, _, sign, _ := cardServer(b, "sessions=1&lock-thread="+lock)
			benchSign(b, sign, msg)
		})
	}
	b.Run("sdf-from-c", func(b *testing.B) {
		benchInC(b, func(ctl *softsdf.Lib, c *card) (func() error, error) {
			e, err := sm2.CalculateSM2Hash(&c.sign[1].PublicKey, msg, nil)
			return func() error { return ctl.BenchSDF(0, 1, []byte(c.pin), e, nil, b.N) }, err
		})
	})
	b.Run("openssl-direct", func(b *testing.B) {
		benchInC(b, func(ctl *softsdf.Lib, c *card) (func() error, error) {
			return func() error { return ctl.BenchDirect(0, filepath.Join(c.dir, "sign-1.pem"), c.pin, b.N) }, nil
		})
	})
}

// benchInC times one C loop of b.N operations on a fresh softsdf device;
// prepare returns the loop.
func benchInC(b *testing.B, prepare func(ctl *softsdf.Lib, c *card) (func() error, error)) {
	lib, c := library(b), newCard(b, 1)
	run, err := prepare(loadLib(b, lib), c)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := run(); err != nil {
		b.Fatal(err)
	}
	reportRate(b, "ops/s")
}

func benchSign(b *testing.B, key crypto.Signer, msg []byte) {
	b.ResetTimer()
	for b.Loop() {
		if _, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "ops/s")
}

func BenchmarkDecrypt(b *testing.B) {
	pms := make([]byte, 48)
	rand.Read(pms)
	b.Run("software", func(b *testing.B) {
		k := softwareKey(b)
		benchDecrypt(b, k.(crypto.Decrypter), pms)
	})
	for _, lock := range []string{"true", "false"} {
		b.Run("sdf/lock-thread="+lock, func(b *testing.B) {
			_, _, _, enc := cardServer(b, "sessions=1&lock-thread="+lock)
			benchDecrypt(b, enc.(crypto.Decrypter), pms)
		})
	}
	b.Run("sdf-from-c", func(b *testing.B) {
		benchInC(b, func(ctl *softsdf.Lib, c *card) (func() error, error) {
			ct, err := sm2.Encrypt(rand.Reader, &c.enc[1].PublicKey, pms, nil) // 04||x||y||C3||C2
			return func() error { return ctl.BenchSDF(1, 1, []byte(c.pin), nil, standardECCCipher(ct), b.N) }, err
		})
	})
	b.Run("openssl-direct", func(b *testing.B) {
		benchInC(b, func(ctl *softsdf.Lib, c *card) (func() error, error) {
			return func() error { return ctl.BenchDirect(1, filepath.Join(c.dir, "enc-1.pem"), c.pin, b.N) }, nil
		})
	})
}

// standardECCCipher lays a raw C1C3C2 ciphertext out as GM/T 0018-2012's
// ECCCipher {x[64]; y[64]; M[32]; uint L; C[L]}.
func standardECCCipher(ct []byte) []byte {
	out := make([]byte, 512)
	copy(out[32:64], ct[1:33])
	copy(out[96:128], ct[33:65])
	copy(out[128:160], ct[65:97])
	binary.NativeEndian.PutUint32(out[160:], uint32(len(ct)-97))
	copy(out[164:], ct[97:])
	return out
}

func benchDecrypt(b *testing.B, key crypto.Decrypter, pms []byte) {
	ct, err := sm2.EncryptASN1(rand.Reader, pubOf(key), pms)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := key.Decrypt(rand.Reader, ct, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "ops/s")
}

// BenchmarkOverhead takes the Go side of the sdf path apart: the hand-off
// of a request to a session's worker and back, the same with a cgo call
// into the library that does no cryptography (SDF_GetDeviceInfo), and the
// host-side SM3(Z || M) for a 600-byte message.
func BenchmarkOverhead(b *testing.B) {
	for _, lock := range []string{"true", "false"} {
		_, _, sign, _ := cardServer(b, "sessions=1&lock-thread="+lock)
		key := sign.(*sdf.Key)
		for _, call := range []bool{false, true} {
			name := "pool-handoff/lock-thread=" + lock
			if call {
				name = "pool-handoff+cgo-GetDeviceInfo/lock-thread=" + lock
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if err := sdf.RoundTrip(key, call); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("sm3-z-and-message", func(b *testing.B) {
		k, _ := sm2.GenerateKey(rand.Reader)
		msg := make([]byte, 600)
		for b.Loop() {
			sm2.CalculateSM2Hash(&k.PublicKey, msg, nil)
		}
	})
}

// BenchmarkSignParallel signs from many goroutines: the sdf backend with
// four sessions against gmsm on every core.
func BenchmarkSignParallel(b *testing.B) {
	msg := make([]byte, 600)
	b.Run("software", func(b *testing.B) { benchSignParallel(b, softwareKey(b), msg) })
	b.Run("sdf/sessions=4", func(b *testing.B) {
		_, _, sign, _ := cardServer(b, "sessions=4")
		benchSignParallel(b, sign, msg)
	})
}

func benchSignParallel(b *testing.B, key crypto.Signer, msg []byte) {
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, "ops/s")
}

// BenchmarkHandshake runs full ECC_SM4_GCM_SM3 handshakes over loopback,
// client and server in this process, with the server's keys in each
// backend.
func BenchmarkHandshake(b *testing.B) {
	for _, backend := range []string{"software", "sdf"} {
		b.Run(backend, func(b *testing.B) {
			var sign, enc accel.Key
			if backend == "sdf" {
				_, _, sign, enc = cardServer(b, "sessions=4")
			} else {
				sign, enc = softwareKey(b), softwareKey(b)
			}
			p := newPKI(b)
			addr := serveTLCP(b, &tlcp.Config{Certificates: []tlcp.Certificate{identity(b, p, "server.test", sign, enc)}, SessionsDisabled: true})
			cfg := &tlcp.Config{RootCAs: p.Roots, ServerName: "server.test", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, SessionsDisabled: true}
			b.ResetTimer()
			for b.Loop() {
				c, err := dialTLCP(addr, cfg)
				if err != nil {
					b.Fatal(fmt.Errorf("handshake: %w", err))
				}
				c.Close()
			}
			reportRate(b, "handshakes/s")
		})
	}
}

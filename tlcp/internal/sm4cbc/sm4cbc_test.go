package sm4cbc

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/cpufeat"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encrypters returns the kernels to test: every one this CPU and build
// run (the block-at-a-time code runs everywhere).
func encrypters(t testing.TB, key []byte) map[string]*Encrypter {
	t.Helper()
	out := map[string]*Encrypter{}
	for name, k := range map[string]cpufeat.CBCKernel{"serial": cpufeat.CBCSerial, "gfni": cpufeat.CBCLanesGFNI, "aesni": cpufeat.CBCLanesAESNI, "blocks": cpufeat.CBCLanesBlocks} {
		e, err := NewKernel(key, k)
		if err != nil {
			if k == cpufeat.CBCSerial {
				t.Fatal(err)
			}
			continue
		}
		out[name] = e
	}
	return out
}

func TestSbox(t *testing.T) {
	// The first row of the S-box table of GB/T 32907-2016.
	want := mustHex(t, "d690e9fecce13db716b614c228fb2c05")
	if !bytes.Equal(sbox[:16], want) {
		t.Fatalf("S-box starts %x, want %x", sbox[:16], want)
	}
	seen := map[byte]bool{}
	for _, v := range sbox {
		seen[v] = true
	}
	if len(seen) != 256 {
		t.Fatalf("S-box is not a permutation: %d distinct values", len(seen))
	}
}

// TestStandardVectors checks the examples of GB/T 32907-2016, appendix A:
// one encryption, and 1 000 000 encryptions of the block with the same
// key (a CBC chain of zero blocks after the first, from a zero IV).
func TestStandardVectors(t *testing.T) {
	key := mustHex(t, "0123456789abcdeffedcba9876543210")
	once := mustHex(t, "681edf34d206965e86b3e94f536e4246")
	million := mustHex(t, "595298c7c6fd271f0402f804c33d3f66")

	rk := expandKey(key)
	var out [16]byte
	encryptBlock(&rk, out[:], key)
	if !bytes.Equal(out[:], once) {
		t.Fatalf("reference: %x, want %x", out, once)
	}
	vectorBlock(&rk, out[:], key)
	if !bytes.Equal(out[:], once) {
		t.Fatalf("vector rounds in Go: %x, want %x", out, once)
	}

	n := 1000000
	if testing.Short() {
		n = 1
	}
	for name, e := range encrypters(t, key) {
		t.Run(name, func(t *testing.T) {
			chain := make([]byte, 16+16*n)
			copy(chain[16:], key)
			// Two chains side by side for the vector code: the
			// standard's and a one-block one.
			short := make([]byte, 32)
			copy(short[16:], key)
			e.EncryptChains([][]byte{chain, short})
			if got := chain[16:32]; !bytes.Equal(got, once) {
				t.Errorf("first block %x, want %x", got, once)
			}
			if got := short[16:]; !bytes.Equal(got, once) {
				t.Errorf("one-block chain %x, want %x", got, once)
			}
			if n > 1 {
				if got := chain[len(chain)-16:]; !bytes.Equal(got, million) {
					t.Errorf("after %d encryptions %x, want %x", n, got, million)
				}
			}
		})
	}
}

// vectorBlock runs the algorithm of kernel_amd64.s in Go, one lane:
// GF2P8AFFINEINVQB emulated, the state in the image of tables.in.
func vectorBlock(rk *[32]uint32, dst, src []byte) {
	vrk := vectorRoundKeys(rk)
	affineInv := func(m bitMatrix, x uint32) uint32 {
		var out uint32
		for k := 0; k < 4; k++ {
			out |= uint32(m.apply(gfInv(byte(x>>(8*k)), polyAES))) << (8 * k)
		}
		return out
	}
	var y [36]uint32
	for i := 0; i < 4; i++ {
		y[i] = applyBytes(tables.in, binary.LittleEndian.Uint32(src[4*i:]))
	}
	for j := 0; j < 32; j++ {
		x := y[j+1] ^ y[j+2] ^ y[j+3] ^ vrk[j]
		t := affineInv(tables.round[0], x)
		for o := 1; o < 4; o++ {
			t ^= bits.RotateLeft32(affineInv(tables.round[o], x), 8*o)
		}
		y[j+4] = y[j] ^ t
	}
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint32(dst[4*i:], applyBytes(tables.out, y[35-i]))
	}
}

func TestVectorRoundsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		key, src := make([]byte, 16), make([]byte, 16)
		for j := range key {
			key[j], src[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		rk := expandKey(key)
		var want, got [16]byte
		encryptBlock(&rk, want[:], src)
		vectorBlock(&rk, got[:], src)
		if want != got {
			t.Fatalf("key %x block %x: vector rounds %x, reference %x", key, src, got, want)
		}
		// And gmsm agrees with the reference.
		b, _ := sm4.NewCipher(key)
		b.Encrypt(got[:], src)
		if want != got {
			t.Fatalf("key %x block %x: gmsm %x, reference %x", key, src, got, want)
		}
	}
}

func TestMatrixLayout(t *testing.T) {
	// GF2P8AFFINEQB reads row i of the matrix from byte 7-i.
	id := matrixOf(func(x byte) byte { return x })
	if q := id.qword(); q != 0x0102040810204080 {
		t.Fatalf("identity as a quadword: %#x", q)
	}
	if got := tables.out.mul(tables.in); got != id {
		t.Fatalf("out·in = %v, want the identity", got)
	}
}

// gmsmCBC is the reference: gmsm's CBC encrypter over a copy.
func gmsmCBC(t testing.TB, key, chain []byte) []byte {
	b, err := sm4.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(chain)
	cipher.NewCBCEncrypter(b, out[:16]).CryptBlocks(out[16:], out[16:])
	return out
}

// checkAgainstGmsm encrypts copies of chains with every implementation
// and compares each chain with gmsm's CBC encrypter.
func checkAgainstGmsm(t testing.TB, key []byte, chains [][]byte, what string) {
	t.Helper()
	for name, e := range encrypters(t, key) {
		got := make([][]byte, len(chains))
		for i, c := range chains {
			got[i] = bytes.Clone(c)
		}
		e.EncryptChains(got)
		for i, c := range chains {
			if want := gmsmCBC(t, key, c); !bytes.Equal(got[i], want) {
				t.Fatalf("%s, %s: chain %d of %d (%d blocks) differs from gmsm", name, what, i, len(chains), len(c)/16-1)
			}
		}
	}
}

func TestAgainstGmsm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 300; round++ {
		key := make([]byte, 16)
		for j := range key {
			key[j] = byte(r.Uint32())
		}
		// 1 to 9 chains of 0 to 40 blocks after the IV, so that lanes
		// finish at different times and take new chains.
		chains := make([][]byte, 1+r.IntN(9))
		for i := range chains {
			chains[i] = make([]byte, 16*(1+r.IntN(41)))
			for j := range chains[i] {
				chains[i][j] = byte(r.Uint32())
			}
		}
		checkAgainstGmsm(t, key, chains, fmt.Sprintf("round %d", round))
	}
	if idleChain != [32]byte{} {
		t.Fatalf("idle lanes wrote to idleChain: %x", idleChain)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(make([]byte, 15)); err == nil {
		t.Fatal("a 15-byte key was accepted")
	}
	e, err := New(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 15, 17, 40} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a chain of %d bytes did not panic", n)
				}
			}()
			e.EncryptChains([][]byte{make([]byte, n)})
		}()
	}
	// A chain that is only an IV is left alone.
	iv := []byte("0123456789abcdef")
	c := bytes.Clone(iv)
	e.EncryptChains([][]byte{c})
	if !bytes.Equal(c, iv) {
		t.Fatalf("an IV-only chain changed to %x", c)
	}
}

func FuzzEncryptChains(f *testing.F) {
	f.Add(make([]byte, 16), make([]byte, 64), []byte{1})
	f.Add([]byte("0123456789abcdef"), bytes.Repeat([]byte{0xa5}, 16*20), []byte{3, 1, 0, 7, 2})
	f.Fuzz(func(t *testing.T, key, data, lengths []byte) {
		if len(key) != 16 {
			return
		}
		// Cut data into chains of lengths[i] blocks after a 16-byte IV.
		var chains [][]byte
		for _, n := range lengths {
			size := 16 * (1 + int(n%24))
			if size > len(data) {
				break
			}
			chains = append(chains, data[:size])
			data = data[size:]
		}
		if len(chains) == 0 {
			return
		}
		checkAgainstGmsm(t, key, chains, "fuzz input")
	})
}

// BenchmarkEncrypt encrypts 16 KiB chains: gmsm's CBC encrypter, this
// package one chain at a time, and several chains at once.
func BenchmarkEncrypt(b *testing.B) {
	key := make([]byte, 16)
	const size = 16 << 10
	b.Run("gmsm/16KiB", func(b *testing.B) {
		block, _ := sm4.NewCipher(key)
		buf := make([]byte, 16+size)
		b.SetBytes(size)
		for b.Loop() {
			cipher.NewCBCEncrypter(block, buf[:16]).CryptBlocks(buf[16:], buf[16:])
		}
	})
	for name, e := range encrypters(b, key) {
		for _, chains := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/%dx16KiB", name, chains), func(b *testing.B) {
				cs := make([][]byte, chains)
				for i := range cs {
					cs[i] = make([]byte, 16+size)
				}
				b.SetBytes(int64(chains * size))
				for b.Loop() {
					e.EncryptChains(cs)
				}
			})
		}
	}
}

// TestApplyBytesByColumns checks the column form of a byte matrix applied
// to four bytes at once against applying it byte by byte, row by row.
func TestApplyBytesByColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ms := []bitMatrix{tables.in, tables.out, tables.round[0], sboxA}
	for range 20 {
		var m bitMatrix
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		c := m.columns()
		for range 200 {
			d := rng.Uint32()
			var want uint32
			for k := 0; k < 4; k++ {
				want |= uint32(m.apply(byte(d>>(8*k)))) << (8 * k)
			}
			if got := c.applyBytes(d); got != want {
				t.Fatalf("matrix %x, %08x: %08x, want %08x", m, d, got, want)
			}
		}
	}
}

// BenchmarkVectorRoundKeys times the part of a key schedule the vector
// kernels add (per record key: two per handshake), beside applying the
// input matrix row by row as it was first written.
func BenchmarkVectorRoundKeys(b *testing.B) {
	rk := expandKey(make([]byte, 16))
	b.Run("columns", func(b *testing.B) {
		for b.Loop() {
			vrk := vectorRoundKeys(&rk)
			rk[0] ^= vrk[0]
		}
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			var out [33]uint32
			for i := range 32 {
				d := bits.ReverseBytes32(rk[i])
				for k := 0; k < 4; k++ {
					out[i] |= uint32(tables.in.apply(byte(d>>(8*k)))) << (8 * k)
				}
			}
			rk[0] ^= out[0]
		}
	})
}

// TestVectorRoundKeysGFNI checks the GFNI key schedule against the
// reference schedule (the S-box from its table) mapped by
// vectorRoundKeys, for the standard's key and random ones.
func TestVectorRoundKeysGFNI(t *testing.T) {
	if !haveLanes {
		t.Skip("no GFNI and AVX-512 on this CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	keys := [][]byte{mustHex(t, "0123456789abcdeffedcba9876543210"), make([]byte, 16), bytes.Repeat([]byte{0xff}, 16)}
	for range 1000 {
		k := make([]byte, 16)
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		rk := expandKey(k)
		want := vectorRoundKeys(&rk)
		if got := VectorRoundKeysGFNI(k); got != want {
			t.Fatalf("key %x:\n got %08x\nwant %08x", k, got, want)
		}
	}
}

// BenchmarkVectorRoundKeysGFNI times the whole key schedule of the vector
// kernels with GFNI (per record key: two per handshake).
func BenchmarkVectorRoundKeysGFNI(b *testing.B) {
	if !haveLanes {
		b.Skip("no GFNI and AVX-512 on this CPU")
	}
	key := make([]byte, 16)
	for b.Loop() {
		rk := VectorRoundKeysGFNI(key)
		key[0] ^= byte(rk[0])
	}
}

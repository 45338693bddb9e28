package sm4cbc

import (
	"math/rand/v2"
	"testing"
)

// TestAESNIModel checks the constants of the AES-NI kernel on any
// architecture: the S-box through the pre map, AESENCLAST (modelled) and
// the post map is SM4's S-box, in place.
func TestAESNIModel(t *testing.T) {
	k := aesniConstants()
	for x := 0; x < 256; x += 16 {
		var in [16]byte
		for i := range in {
			in[i] = byte(x + i)
		}
		out := aesniModel(k, in)
		for i := range in {
			if out[i] != sbox[in[i]] {
				t.Fatalf("S(%#02x) = %#02x through AESENCLAST, want %#02x", in[i], out[i], sbox[in[i]])
			}
		}
	}
}

// TestAESNISbox checks the kernel's S-box and its key schedule against the
// table on a CPU that runs it.
func TestAESNISbox(t *testing.T) {
	if !haveAESNI {
		t.Skip("no AES-NI and AVX here")
	}
	k := aesniConstants()
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 1000; i++ {
		a := r.Uint32()
		if got, want := k.tau(a), tau(a); got != want {
			t.Fatalf("tau(%#08x) = %#08x, want %#08x", a, got, want)
		}
	}
	key := []byte("0123456789abcdef")
	rk := expandKey(key)
	want := vectorRoundKeys(&rk)
	got := newAESNIKey(key).rk
	for i := range want {
		for l := range got[i] {
			if got[i][l] != want[i] {
				t.Fatalf("round key %d in lane %d: %#08x, want %#08x", i, l, got[i][l], want[i])
			}
		}
	}
}

// TestAESNIRoundTables checks that the round tables applied to what
// AESENCLAST gives are the matrices of the GFNI kernel applied to the
// inverse in the AES field.
func TestAESNIRoundTables(t *testing.T) {
	k := aesniConstants()
	for z := 0; z < 256; z++ {
		y := aesAffine(gfInv(byte(z), polyAES)) ^ 0x63
		inv := gfInv(byte(z), polyAES)
		for o, b := range tables.round {
			if got, want := k.round[o][0][y&15]^k.round[o][1][y>>4], b.apply(inv); got != want {
				t.Fatalf("B_%d at %#02x: %#02x, want %#02x", o, z, got, want)
			}
		}
		if got, want := k.inLo[z&15]^k.inHi[z>>4], tables.in.apply(byte(z)); got != want {
			t.Fatalf("in(%#02x) = %#02x, want %#02x", z, got, want)
		}
	}
}

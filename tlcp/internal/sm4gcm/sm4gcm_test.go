package sm4gcm

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/cpufeat"
)

// kernels are the implementations this CPU and build run.
func kernels(t testing.TB) []cpufeat.GCMKernel {
	ks := []cpufeat.GCMKernel{cpufeat.GCMGmsm}
	if haveKernel {
		ks = append(ks, cpufeat.GCMWideGFNI)
	} else {
		t.Log("no AVX-512, GFNI and VPCLMULQDQ here: only gmsm's GCM is tested")
	}
	return ks
}

// reference is gmsm's SM4-GCM.
func reference(t testing.TB, key []byte) cipher.AEAD {
	b, err := sm4.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestBlockVector checks the kernel's SM4 against the example of GB/T
// 32907-2016: a counter block is a plaintext block.
func TestBlockVector(t *testing.T) {
	if !haveKernel {
		t.Skip("no kernel on this CPU")
	}
	key := unhex("0123456789abcdeffedcba9876543210")
	g := newWide(key)
	var nonce [12]byte
	copy(nonce[:], key)
	var buf [batch]byte
	ctrBlocks(&g.k, &nonce, binary.BigEndian.Uint32(key[12:]), &buf[0], &buf[0], 1)
	if want := unhex("681edf34d206965e86b3e94f536e4246"); !bytes.Equal(buf[:16], want) {
		t.Fatalf("E(P) = %x, want %x", buf[:16], want)
	}
}

// TestRFC8998 checks the SM4-GCM example of RFC 8998, appendix A.1.
func TestRFC8998(t *testing.T) {
	key := unhex("0123456789abcdeffedcba9876543210")
	nonce := unhex("00001234567800000000abcd")
	pt := unhex("aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbccccccccccccccccddddddddddddddddeeeeeeeeeeeeeeeeffffffffffffffffeeeeeeeeeeeeeeeeaaaaaaaaaaaaaaaa")
	ad := unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
	want := unhex("17f399f08c67d5ee19d0dc9969c4bb7d5fd46fd3756489069157b282bb200735d82710ca5c22f0ccfa7cbf93d496ac15a56834cbcf98c397b4024a2691233b8d" +
		"83de3541e4c2b58177e065a9bf7b62ec")
	for _, k := range kernels(t) {
		a, err := NewKernel(key, k)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
			t.Fatalf("kernel %d: sealed %x, want %x", k, got, want)
		}
		got, err := a.Open(nil, nonce, want, ad)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("kernel %d: opened %x, %v", k, got, err)
		}
	}
}

// TestDifferential seals and opens random messages of every length up to
// nine batches and more, with random keys, nonces and additional data, and
// compares with gmsm's SM4-GCM.
func TestDifferential(t *testing.T) {
	if !haveKernel {
		t.Skip("no kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	key := make([]byte, 16)
	nonce := make([]byte, 12)
	for n := 0; n <= 9*batch+300; n++ {
		if n%64 == 0 {
			fill(key)
		}
		fill(nonce)
		pt := make([]byte, n)
		fill(pt)
		ad := make([]byte, rng.IntN(80))
		fill(ad)
		checkAgainstReference(t, key, nonce, pt, ad)
	}
	// Longer messages: a TLCP record and more, with long additional data.
	for _, n := range []int{4096, 16384, 16384 + 5, 65536 + 17} {
		fill(key)
		fill(nonce)
		pt := make([]byte, n)
		fill(pt)
		ad := make([]byte, n/3)
		fill(ad)
		checkAgainstReference(t, key, nonce, pt, ad)
	}
}

// TestCounterWrap checks the 32-bit counter wrapping within a batch, as
// GCM's inc32 does for nonces whose last bytes come from elsewhere: the
// kernel against gmsm's counter mode on a counter block near 2^32.
func TestCounterWrap(t *testing.T) {
	if !haveKernel {
		t.Skip("no kernel on this CPU")
	}
	key := unhex("000102030405060708090a0b0c0d0e0f")
	g := newWide(key)
	b, _ := sm4.NewCipher(key)
	var nonce [12]byte
	copy(nonce[:], "wrap-counter")
	const start = 0xfffffff5
	var got [2 * batch]byte
	ctrBlocks(&g.k, &nonce, start, &got[0], &got[0], 2)
	for i := 0; i < 32; i++ {
		var blk [16]byte
		copy(blk[:], nonce[:])
		binary.BigEndian.PutUint32(blk[12:], uint32(start+i))
		b.Encrypt(blk[:], blk[:])
		if !bytes.Equal(got[16*i:16*i+16], blk[:]) {
			t.Fatalf("block %d: %x, want %x", i, got[16*i:16*i+16], blk)
		}
	}
}

func checkAgainstReference(t *testing.T, key, nonce, pt, ad []byte) {
	t.Helper()
	ref := reference(t, key)
	a, err := NewKernel(key, cpufeat.GCMWideGFNI)
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Seal(nil, nonce, pt, ad)
	got := a.Seal(nil, nonce, pt, ad)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%d bytes, %d of additional data: sealed output differs from byte %d on (%d is the tag)", len(pt), len(ad), i, len(pt))
	}
	// In place, after a prefix, as the record layer does.
	buf := make([]byte, 5, 5+len(pt)+TagSize)
	buf = append(buf, pt...)
	sealed := a.Seal(buf[:5], nonce, buf[5:], ad)
	if !bytes.Equal(sealed[5:], want) {
		t.Fatalf("%d bytes sealed in place differ", len(pt))
	}
	opened, err := a.Open(sealed[5:5], nonce, sealed[5:], ad)
	if err != nil || !bytes.Equal(opened, pt) {
		t.Fatalf("%d bytes: opened in place %x, %v", len(pt), opened, err)
	}
	// Any flipped bit fails, and leaves nothing decrypted.
	bad := append([]byte(nil), want...)
	bad[len(bad)/2] ^= 1 << (len(pt) % 8)
	if out, err := a.Open(nil, nonce, bad, ad); err == nil || out != nil {
		t.Fatalf("%d bytes: a flipped bit opened: %x, %v", len(pt), out, err)
	}
	if len(ad) > 0 {
		ad2 := append([]byte(nil), ad...)
		ad2[0] ^= 0x80
		if _, err := a.Open(nil, nonce, want, ad2); err == nil {
			t.Fatalf("%d bytes: other additional data opened", len(pt))
		}
	}
}

func TestShortAndOverlap(t *testing.T) {
	for _, k := range kernels(t) {
		a, err := NewKernel(make([]byte, 16), k)
		if err != nil {
			t.Fatal(err)
		}
		nonce := make([]byte, 12)
		for n := 0; n < TagSize; n++ {
			if _, err := a.Open(nil, nonce, make([]byte, n), nil); err == nil {
				t.Fatalf("kernel %d: %d bytes opened", k, n)
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("kernel %d: a shifted overlap did not panic", k)
				}
			}()
			buf := make([]byte, 100)
			a.Seal(buf[1:1], nonce, buf[:64], nil)
		}()
	}
	if _, err := New(make([]byte, 15)); err == nil {
		t.Fatal("a 15-byte key was taken")
	}
}

// TestSealAllocatesNothing: sealing and opening in place into a buffer
// with room allocate nothing.
func TestSealAllocatesNothing(t *testing.T) {
	for _, k := range kernels(t) {
		a, _ := NewKernel(make([]byte, 16), k)
		nonce := make([]byte, 12)
		ad := make([]byte, 13)
		buf := make([]byte, 1000+TagSize)
		allocs := testing.AllocsPerRun(20, func() {
			ct := a.Seal(buf[:0], nonce, buf[:1000], ad)
			if _, err := a.Open(ct[:0], nonce, ct, ad); err != nil {
				t.Fatal(err)
			}
		})
		if k == cpufeat.GCMWideGFNI && allocs != 0 {
			t.Errorf("kernel %d: %v allocations per seal and open", k, allocs)
		}
	}
}

// FuzzSeal compares the kernel with gmsm's SM4-GCM on fuzzed keys, nonces,
// messages and additional data, and opens what it sealed. keyNonce is
// cut or zero-padded to a 16-byte key and a 12-byte nonce.
func FuzzSeal(f *testing.F) {
	f.Add([]byte{}, []byte{}, []byte{})
	f.Add(unhex("0123456789abcdeffedcba987654321000001234567800000000abcd"),
		bytes.Repeat([]byte{0xaa}, 300), unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2"))
	f.Add(bytes.Repeat([]byte{0xff}, 28), make([]byte, 257), make([]byte, 17))
	f.Add([]byte("k"), make([]byte, 1024+256+15), []byte("ad"))
	f.Fuzz(func(t *testing.T, keyNonce, pt, ad []byte) {
		if !haveKernel {
			t.Skip("no kernel on this CPU")
		}
		kn := make([]byte, 28)
		copy(kn, keyNonce)
		checkAgainstReference(t, kn[:16], kn[16:], pt, ad)
	})
}

// FuzzOpen opens fuzzed ciphertexts with both implementations: they agree
// on whether it is authentic and on the plaintext.
func FuzzOpen(f *testing.F) {
	key := unhex("0123456789abcdeffedcba9876543210")
	nonce := unhex("00001234567800000000abcd")
	f.Add(reference(f, key).Seal(nil, nonce, []byte("a record"), []byte("ad")), []byte("ad"))
	f.Add([]byte{}, []byte{})
	f.Add(make([]byte, 300), []byte{1})
	f.Fuzz(func(t *testing.T, ct, ad []byte) {
		if !haveKernel {
			t.Skip("no kernel on this CPU")
		}
		a, err := NewKernel(key, cpufeat.GCMWideGFNI)
		if err != nil {
			t.Fatal(err)
		}
		want, errWant := reference(t, key).Open(nil, nonce, ct, ad)
		got, errGot := a.Open(nil, nonce, ct, ad)
		if (errWant == nil) != (errGot == nil) || !bytes.Equal(got, want) {
			t.Fatalf("opened %x, %v; gmsm %x, %v", got, errGot, want, errWant)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	for _, k := range kernels(b) {
		for _, n := range []int{1024, 16384} {
			a, _ := NewKernel(make([]byte, 16), k)
			nonce := make([]byte, 12)
			ad := make([]byte, 13)
			buf := make([]byte, n+TagSize)
			name := map[cpufeat.GCMKernel]string{cpufeat.GCMGmsm: "gmsm", cpufeat.GCMWideGFNI: "wide"}[k]
			b.Run(fmt.Sprintf("%s/%dKiB", name, n/1024), func(b *testing.B) {
				b.SetBytes(int64(n))
				for i := 0; i < b.N; i++ {
					a.Seal(buf[:0], nonce, buf[:n], ad)
				}
			})
		}
	}
}

// BenchmarkNew measures a key setup, which the session store does for
// every value it seals or opens.
func BenchmarkNew(b *testing.B) {
	key := make([]byte, 16)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := New(key); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPowersOnFirstUse uses keys whose powers of H (and byte round keys,
// for 64 blocks at once) are filled only when a long message comes: one
// key for short messages first and long ones
// after, and fresh keys sealing long messages from several goroutines at
// once (run with -race), each against gmsm's SM4-GCM.
func TestPowersOnFirstUse(t *testing.T) {
	if !haveKernel {
		t.Skip("no kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	key, nonce := make([]byte, 16), make([]byte, 12)
	fill(key)
	fill(nonce)
	ref := reference(t, key)
	a, err := NewKernel(key, cpufeat.GCMWideGFNI)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 200, 255, 256, 257, 1000, 16384, 40} {
		pt, ad := make([]byte, n), make([]byte, n%70)
		fill(pt)
		fill(ad)
		if got, want := a.Seal(nil, nonce, pt, ad), ref.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes after shorter ones: sealed output differs", n)
		}
	}

	pt, ad := make([]byte, 4096), make([]byte, 300)
	fill(pt)
	fill(ad)
	for range 20 {
		fill(key)
		want := reference(t, key).Seal(nil, nonce, pt, ad)
		fresh, err := NewKernel(key, cpufeat.GCMWideGFNI)
		if err != nil {
			t.Fatal(err)
		}
		results := make(chan []byte, 4)
		for range cap(results) {
			go func() { results <- fresh.Seal(nil, nonce, pt, ad) }()
		}
		for range cap(results) {
			if got := <-results; !bytes.Equal(got, want) {
				t.Fatal("a long message sealed concurrently on a fresh key differs")
			}
		}
	}
}

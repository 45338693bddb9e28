package accel

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
)

func bigOf(s scalar) *big.Int { return new(big.Int).SetBytes(scalarBytes(s)) }

func scalarOf(t *testing.T, v *big.Int) scalar {
	t.Helper()
	return scalarFromBytes(v.FillBytes(make([]byte, 32)))
}

// TestOrderArithmetic checks the arithmetic modulo n against math/big on
// the edges and on random values.
func TestOrderArithmetic(t *testing.T) {
	n := bigOf(orderN)
	if want, _ := new(big.Int).SetString("FFFFFFFEFFFFFFFFFFFFFFFFFFFFFFFF7203DF6B21C6052B53BBF40939D54123", 16); n.Cmp(want) != 0 {
		t.Fatalf("n = %x", n)
	}
	rng := mrand.New(mrand.NewPCG(7, 8))
	nm1 := new(big.Int).Sub(n, big.NewInt(1))
	vals := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(2), nm1, new(big.Int).Sub(n, big.NewInt(2)), new(big.Int).Rsh(n, 1)}
	for range 300 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		vals = append(vals, new(big.Int).Mod(new(big.Int).SetBytes(b), n))
	}
	rInv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 256), n)
	for i, a := range vals {
		b := vals[(i*7+3)%len(vals)]
		sa, sb := scalarOf(t, a), scalarOf(t, b)
		if got, want := bigOf(addMod(sa, sb)), new(big.Int).Mod(new(big.Int).Add(a, b), n); got.Cmp(want) != 0 {
			t.Fatalf("%x + %x = %x, want %x", a, b, got, want)
		}
		if got, want := bigOf(subMod(sa, sb)), new(big.Int).Mod(new(big.Int).Sub(a, b), n); got.Cmp(want) != 0 {
			t.Fatalf("%x - %x = %x, want %x", a, b, got, want)
		}
		want := new(big.Int).Mul(a, b)
		want.Mul(want, rInv).Mod(want, n)
		if got := bigOf(montMul(sa, sb)); got.Cmp(want) != 0 {
			t.Fatalf("montMul(%x, %x) = %x, want %x", a, b, got, want)
		}
		if a.Sign() != 0 && i < 40 {
			// invertMont(toMont(a)) is a⁻¹·2^256; montMul by 1 undoes it.
			got := bigOf(montMul(invertMont(toMont(sa)), scalar{1}))
			if want := new(big.Int).ModInverse(a, n); got.Cmp(want) != 0 {
				t.Fatalf("1/%x = %x, want %x", a, got, want)
			}
		}
	}
}

// TestSM2SignerVerifies signs with the precomputed signer and verifies
// with gmsm, for several keys and messages; a changed message or
// signature does not verify, and no two signatures of one message are
// the same.
func TestSM2SignerVerifies(t *testing.T) {
	for range 20 {
		priv, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key := NewSoftwareKey(priv).(*softwareSM2Key)
		if key.signer == nil {
			t.Fatal("no precomputed signer for a valid key")
		}
		msg := make([]byte, 64+3+400)
		rand.Read(msg)
		seen := map[string]bool{}
		for range 10 {
			sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
			if err != nil {
				t.Fatal(err)
			}
			if !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
				t.Fatal("signature does not verify")
			}
			if seen[string(sig)] {
				t.Fatal("the same signature twice")
			}
			seen[string(sig)] = true
			bad := bytes.Clone(sig)
			bad[len(bad)-1] ^= 1
			if sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, bad) {
				t.Fatal("a changed signature verifies")
			}
			other := append(bytes.Clone(msg), 0)
			if sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, other, sig) {
				t.Fatal("signature verifies over another message")
			}
		}
	}
}

// TestSM2SignerConcurrent signs with one key from several goroutines at
// once, which share the signer's scratch pool: every signature verifies.
func TestSM2SignerConcurrent(t *testing.T) {
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := NewSoftwareKey(priv)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 20 {
				msg := []byte{byte(g), byte(i)}
				sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
				if err == nil && !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
					err = fmt.Errorf("signature %d of goroutine %d does not verify", i, g)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// zeroReader is a random source that has failed into zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type failingReader struct{}

func (failingReader) Read(p []byte) (int, error) { return 0, errors.New("no randomness") }

// TestSM2SignerHedged checks that a broken random source still gives
// signatures that verify, with nonces that differ per message, and that
// a failing one is an error.
func TestSM2SignerHedged(t *testing.T) {
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := NewSoftwareKey(priv)
	r := map[string]bool{}
	for i := range 5 {
		msg := []byte{byte(i)}
		sig, err := key.Sign(zeroReader{}, msg, sm2.DefaultSM2SignerOpts)
		if err != nil {
			t.Fatal(err)
		}
		if !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
			t.Fatal("signature with zero randomness does not verify")
		}
		r[string(sig[:36])] = true
	}
	if len(r) != 5 {
		t.Error("nonces repeat across messages when the random source returns zeros")
	}
	if _, err := key.Sign(failingReader{}, []byte("m"), sm2.DefaultSM2SignerOpts); err == nil {
		t.Error("signing with a failing random source succeeded")
	}
}

// TestSM2SignerKeyRange refuses scalars outside [1, n−2].
func TestSM2SignerKeyRange(t *testing.T) {
	n := bigOf(orderN)
	for _, d := range []*big.Int{big.NewInt(0), new(big.Int).Sub(n, big.NewInt(1)), n, new(big.Int).Add(n, big.NewInt(5))} {
		if _, err := newSM2Signer(d.FillBytes(make([]byte, 32))); err == nil {
			t.Errorf("d = %x accepted", d)
		}
	}
	for _, d := range []*big.Int{big.NewInt(1), new(big.Int).Sub(n, big.NewInt(2))} {
		s, err := newSM2Signer(d.FillBytes(make([]byte, 32)))
		if err != nil {
			t.Fatalf("d = %x refused: %v", d, err)
		}
		// Verify against the public key d·G.
		priv, err := sm2.NewPrivateKey(d.FillBytes(make([]byte, 32)))
		if err != nil {
			t.Fatal(err)
		}
		e := sm3.Sum([]byte("edge"))
		sig, err := s.sign(rand.Reader, e[:])
		if err != nil {
			t.Fatal(err)
		}
		if !sm2.VerifyASN1(&priv.PublicKey, e[:], sig) {
			t.Errorf("d = %x: signature does not verify", d)
		}
	}
}

// TestSM2SignerNonceIsHMAC checks the nonce PRF, run from saved SM3
// states, against crypto/hmac with the key it is meant to have.
func TestSM2SignerNonceIsHMAC(t *testing.T) {
	d := make([]byte, 32)
	d[31] = 9
	s, err := newSM2Signer(d)
	if err != nil {
		t.Fatal(err)
	}
	key := sm3.Sum(append([]byte("gmgate SM2 signature nonce key\x00"), d...))
	var z [32]byte
	rand.Read(z[:])
	e := sm3.Sum([]byte("message"))
	sc := s.scratch()
	copy(sc.in[:32], z[:])
	copy(sc.in[32:64], e[:])
	s.nonce(sc, 3)
	got := sc.k
	mac := hmac.New(sm3.New, key[:])
	mac.Write(z[:])
	mac.Write(e[:])
	mac.Write([]byte{3})
	if want := mac.Sum(nil); !bytes.Equal(got[:], want) {
		t.Fatalf("nonce %x, want %x", got, want)
	}
	// What goes back to the pool holds nothing of this signature, and
	// computes the same nonce when used again.
	s.release(sc)
	if sc.in != [65]byte{} || sc.k != [32]byte{} || sc.e != [32]byte{} {
		t.Fatal("released scratch keeps the signature's values")
	}
	state, err := sc.h.(sm3State).MarshalBinary()
	if err != nil || !bytes.Equal(state, s.innerState) {
		t.Fatalf("released SM3 state %x, want the key's inner state %x", state, s.innerState)
	}
	copy(sc.in[:32], z[:])
	copy(sc.in[32:64], e[:])
	s.nonce(sc, 3)
	if sc.k != got {
		t.Fatalf("nonce from a reused scratch %x, want %x", sc.k, got)
	}
}

// TestEncodeSM2Signature compares the DER writer with encoding/asn1 on
// values with and without leading zero bytes and top bits.
func TestEncodeSM2Signature(t *testing.T) {
	vals := []scalar{{1}, {0x80}, {0xff, 0, 0, 0}, {0, 0, 0, 1 << 63}, {0, 0, 0, 0x7f << 56}, orderN, {5, 0, 0, 0xff}}
	for _, r := range vals {
		for _, s := range vals {
			got, err := encodeSM2Signature(r, s)
			if err != nil {
				t.Fatal(err)
			}
			want, err := asn1.Marshal(struct{ R, S *big.Int }{bigOf(r), bigOf(s)})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("r %x s %x: %x, want %x", r, s, got, want)
			}
		}
	}
}

// TestSM2DecryptASN1 decrypts ASN.1 ciphertexts through the plain form
// and compares with gmsm on the same ciphertexts, intact and changed
// byte by byte: the same plaintext or both refused.
func TestSM2DecryptASN1(t *testing.T) {
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := NewSoftwareKey(priv).(*softwareSM2Key)
	for i := range 30 {
		msg := make([]byte, 48)
		rand.Read(msg)
		ct, err := sm2.EncryptASN1(rand.Reader, &priv.PublicKey, msg)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := key.Decrypt(rand.Reader, ct, nil)
		if err != nil || !bytes.Equal(pt, msg) {
			t.Fatalf("decrypted %x, %v", pt, err)
		}
		for j := 0; j < len(ct); j += 1 + i%3 {
			bad := bytes.Clone(ct)
			bad[j] ^= byte(1 << (j % 8))
			got, gotErr := key.Decrypt(rand.Reader, bad, nil)
			want, wantErr := priv.Decrypt(rand.Reader, bad, nil)
			if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("byte %d changed: %x, %v; gmsm %x, %v", j, got, gotErr, want, wantErr)
			}
		}
		for _, bad := range [][]byte{ct[:len(ct)-1], append(bytes.Clone(ct), 0), nil, {0x30, 0}} {
			if _, err := key.Decrypt(rand.Reader, bad, nil); err == nil {
				t.Fatalf("malformed ciphertext %x decrypted", bad)
			}
		}
	}
}

package sessionstore

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/cbcmac"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

const (
	key1 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	key2 = "f0e0d0c0b0a090807060504030201000ffeeddccbbaa99887766554433221100"
)

func mustKeys(t testing.TB, text string) *Keys {
	t.Helper()
	k, err := ParseKeys(text, "test keys")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseKeys(t *testing.T) {
	k := mustKeys(t, "# rotation: new key first\n"+key2+"\n\n"+key1+"\n")
	if k.Len() != 2 {
		t.Fatalf("%d keys, want 2", k.Len())
	}
	if !k.Equal(mustKeys(t, key2+", "+key1)) || k.Equal(mustKeys(t, key1+" "+key2)) {
		t.Fatal("Equal does not compare the keys in order")
	}
	for _, tc := range []struct{ text, want string }{
		{"", "holds no key"},
		{"# only a comment\n", "holds no key"},
		{key1[:62], "key 1 (line 1) is 62 characters"},
		{key1 + "\n" + strings.Repeat("zz", 32), "key 2 (line 2) is not 64 hexadecimal digits"},
		{key1 + "\n" + key2 + "\n" + key1, "key 3 (line 3) repeats key 1"},
	} {
		_, err := ParseKeys(tc.text, "keys.txt")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "keys.txt") {
			t.Errorf("ParseKeys(%q) = %v, want an error naming keys.txt and saying %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), key1[:16]) {
			t.Errorf("the error repeats the key: %v", err)
		}
	}
}

func TestSealOpen(t *testing.T) {
	old := mustKeys(t, key1)
	rotated := mustKeys(t, key2+"\n"+key1)
	value := []byte("a session's master secret and its binding")
	ad := []byte("gmgate:tlcp:0102")

	sealed, err := old.Seal(value, ad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, value[:16]) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if len(sealed) != len(value)+Overhead {
		t.Fatalf("sealed %d bytes into %d, want %d", len(value), len(sealed), len(value)+Overhead)
	}
	// A key list that still has the old key opens what it sealed.
	for _, k := range []*Keys{old, rotated} {
		got, err := k.Open(sealed, ad)
		if err != nil || !bytes.Equal(got, value) {
			t.Fatalf("Open = %q, %v", got, err)
		}
	}
	// New values are sealed with the first key only.
	newSealed, _ := rotated.Seal(value, ad)
	if _, err := old.Open(newSealed, ad); err == nil {
		t.Fatal("a value sealed with the new first key opened with the old key alone")
	}
	if _, err := mustKeys(t, key2).Open(sealed, ad); err == nil {
		t.Fatal("a value opened without the key that sealed it")
	}
	// What the first key sealed, and nothing else, is known as such.
	if !old.SealedWithFirst(sealed) || rotated.SealedWithFirst(sealed) || !rotated.SealedWithFirst(newSealed) || old.SealedWithFirst(sealed[:Overhead-17]) {
		t.Fatal("SealedWithFirst does not tell the first key's values from others")
	}
	// Bound to its Redis key: moved elsewhere, it does not open.
	if _, err := old.Open(sealed, []byte("gmgate:tlcp:0103")); err == nil {
		t.Fatal("a value opened under another key name")
	}
	// Any changed byte (header, salt, ciphertext, tag) is refused.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x40
		if _, err := old.Open(bad, ad); err == nil {
			t.Fatalf("a value with byte %d changed opened", i)
		}
	}
	for _, short := range [][]byte{nil, sealed[:Overhead-1]} {
		if _, err := old.Open(short, ad); err == nil {
			t.Fatal("a truncated value opened")
		}
	}
	// Two seals of one value differ (a fresh salt each).
	again, _ := old.Seal(value, ad)
	if bytes.Equal(again, sealed) {
		t.Fatal("sealing twice gave the same bytes")
	}
}

// TestSealDerivation checks each value's key against an independent CMAC
// (gmsm's, GB/T 15821.1 scheme 5 = NIST SP 800-38B) and the documented
// layout: a value opens with SM4-GCM under CMAC-SM4(HKDF-SM3(key, "gmgate
// seal v2"), 00 01 'X' 00 || salt[:12]) and the nonce salt[12:].
func TestSealDerivation(t *testing.T) {
	k := mustKeys(t, key1)
	value, ad := []byte("session"), []byte("gmgate:tlcp:0102")
	sealed, err := k.Seal(value, ad)
	if err != nil {
		t.Fatal(err)
	}
	if sealed[0] != 2 || len(sealed) != 1+4+24+len(value)+16 {
		t.Fatalf("sealed value of %d bytes, version %d", len(sealed), sealed[0])
	}
	secret, _ := hex.DecodeString(key1)
	dk, err := hkdf.Key(sm3.New, secret, nil, "gmgate seal v2", 16)
	if err != nil {
		t.Fatal(err)
	}
	derive, _ := sm4.NewCipher(dk)
	mac := cbcmac.NewCMAC(derive, 16)
	salt := sealed[5:29]
	valueKey := mac.MAC(append([]byte{0, 1, 'X', 0}, salt[:12]...))
	block, _ := sm4.NewCipher(valueKey)
	gcm, _ := cipher.NewGCM(block)
	got, err := gcm.Open(nil, salt[12:], sealed[29:], append(bytes.Clone(sealed[:29]), ad...))
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("the documented derivation does not open the value: %q, %v", got, err)
	}

	// Opening leaves the sealed bytes as they were: they may be a
	// string's (go-redis hands out a reply's bytes that way).
	before := bytes.Clone(sealed)
	if got, err := k.open(sealed, string(ad)); err != nil || !bytes.Equal(got, value) || !bytes.Equal(sealed, before) {
		t.Fatalf("open = %q, %v; sealed bytes changed: %v", got, err, !bytes.Equal(sealed, before))
	}
}

func TestTicketKeys(t *testing.T) {
	a := mustKeys(t, key2+"\n"+key1)
	edge := a.TicketKeys("edge")
	if len(edge) != 2 {
		t.Fatalf("%d ticket keys, want one per sealing key", len(edge))
	}
	// Same keys, same listener: the same ticket keys on every replica.
	if again := mustKeys(t, key2+"\n"+key1).TicketKeys("edge"); again[0] != edge[0] || again[1] != edge[1] {
		t.Fatal("ticket keys are not derived deterministically")
	}
	// The old key's ticket key stays, second, after a rotation.
	if old := mustKeys(t, key1).TicketKeys("edge"); old[0] != edge[1] {
		t.Fatal("after a rotation the old ticket key is not kept to decrypt")
	}
	if other := a.TicketKeys("internal"); other[0] == edge[0] {
		t.Fatal("two listeners share ticket keys")
	}
	if edge[0] == edge[1] {
		t.Fatal("two sealing keys gave one ticket key")
	}
}

// FuzzOpen feeds Open what a Redis that is not ours could hold.
func FuzzOpen(f *testing.F) {
	k := mustKeys(f, key1)
	good, _ := k.Seal([]byte("value"), []byte("ad"))
	f.Add(good)
	f.Add(good[:Overhead])
	f.Add([]byte{sealVersion})
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, sealed []byte) {
		// Only the seed was sealed with the key (by this process or
		// the one that added it).
		if v, err := k.Open(sealed, []byte("ad")); err == nil && string(v) != "value" {
			t.Fatalf("a value that was not sealed opened: %q", v)
		}
	})
}

// FuzzParseKeys feeds ParseKeys any keys file.
func FuzzParseKeys(f *testing.F) {
	f.Add(key1 + "\n" + key2)
	f.Add("# comment\n" + key1 + ",," + key2 + "\r\n")
	f.Add(key1[:63] + "g")
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ParseKeys(text, "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), strings.TrimSpace(text)) && len(strings.TrimSpace(text)) >= 16 {
				t.Fatalf("the error repeats the input: %v", err)
			}
			return
		}
		if k.Len() == 0 {
			t.Fatal("no key and no error")
		}
	})
}

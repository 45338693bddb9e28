package sdf

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"math/big"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

var testProfiles = []Profile{Profiles["standard"], Profiles["sansec2008"], {Name: "32std", CoordLen: 32, Cipher: CipherStandard}, {Name: "64-2008", CoordLen: 64, Cipher: Cipher2008}}

func testKey(t testing.TB) *sm2.PrivateKey {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// field32 lays a 32-byte value out right-aligned in an n-byte field.
func field32(n int, v []byte) []byte {
	out := make([]byte, n)
	copy(out[n-32:], v)
	return out
}

func TestDecodePublicKey(t *testing.T) {
	k := testKey(t)
	x, y := k.X.FillBytes(make([]byte, 32)), k.Y.FillBytes(make([]byte, 32))
	for _, p := range testProfiles {
		b := binary.NativeEndian.AppendUint32(nil, 256)
		b = append(append(b, field32(p.CoordLen, x)...), field32(p.CoordLen, y)...)
		pub, err := p.decodePublicKey(b)
		if err != nil || !pub.Equal(&k.PublicKey) {
			t.Fatalf("%s: %v", p.Name, err)
		}
		bad := bytes.Clone(b)
		binary.NativeEndian.PutUint32(bad, 512)
		if _, err := p.decodePublicKey(bad); err == nil {
			t.Errorf("%s: bits=512 accepted", p.Name)
		}
		if p.CoordLen == 64 {
			bad = bytes.Clone(b)
			bad[4] = 1
			if _, err := p.decodePublicKey(bad); err == nil {
				t.Errorf("%s: padding not checked", p.Name)
			}
		}
		bad = bytes.Clone(b)
		bad[len(bad)-1] ^= 1
		if _, err := p.decodePublicKey(bad); err == nil {
			t.Errorf("%s: a point off the curve was accepted", p.Name)
		}
		if _, err := p.decodePublicKey(b[:len(b)-1]); err == nil {
			t.Errorf("%s: short structure accepted", p.Name)
		}
	}
	// A 32-byte-coordinate structure read as 64-byte fields is refused.
	b := binary.NativeEndian.AppendUint32(nil, 256)
	b = append(append(b, x...), y...)
	b = append(b, make([]byte, 64)...)
	if _, err := Profiles["standard"].decodePublicKey(b); err == nil {
		t.Error("a 32-byte layout was accepted as 64-byte fields")
	}
}

func TestSignatureDER(t *testing.T) {
	k := testKey(t)
	msg := []byte("ServerKeyExchange parameters")
	der, err := k.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil {
		t.Fatal(err)
	}
	var r, s big.Int
	var inner cryptobyte.String
	in := cryptobyte.String(der)
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !inner.ReadASN1Integer(&r) || !inner.ReadASN1Integer(&s) {
		t.Fatal("cannot parse gmsm's signature")
	}
	for _, p := range testProfiles {
		raw := append(field32(p.CoordLen, r.FillBytes(make([]byte, 32))), field32(p.CoordLen, s.FillBytes(make([]byte, 32)))...)
		got, err := p.signatureDER(raw)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if !sm2.VerifyASN1WithSM2(&k.PublicKey, nil, msg, got) {
			t.Errorf("%s: re-encoded signature does not verify", p.Name)
		}
		zero := make([]byte, 2*p.CoordLen)
		if _, err := p.signatureDER(zero); err == nil {
			t.Errorf("%s: r = s = 0 accepted", p.Name)
		}
		big := append(field32(p.CoordLen, sm2N.Bytes()), raw[p.CoordLen:]...)
		if _, err := p.signatureDER(big); err == nil {
			t.Errorf("%s: r = n accepted", p.Name)
		}
	}
}

func TestCiphertextLayouts(t *testing.T) {
	k := testKey(t)
	msg := make([]byte, 48)
	rand.Read(msg)
	der, err := sm2.EncryptASN1(rand.Reader, &k.PublicKey, msg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCiphertext(der)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sm2.ASN1Ciphertext2Plain(der, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := parseCiphertext(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.x, c2.x) || !bytes.Equal(c.y, c2.y) || !bytes.Equal(c.hash, c2.hash) || !bytes.Equal(c.c2, c2.c2) {
		t.Fatal("the DER and raw forms parse differently")
	}
	// Rebuild the plain C1C3C2 ciphertext from each layout by offset and
	// decrypt it with gmsm.
	for _, p := range testProfiles {
		b := p.encodeCipher(c)
		n := p.CoordLen
		var x, y, hash, data []byte
		switch p.Cipher {
		case Cipher2008:
			l := binary.NativeEndian.Uint32(b)
			x, y, data, hash = b[4+n-32:4+n], b[4+2*n-32:4+2*n], b[4+2*n:4+2*n+int(l)], b[4+2*n+136:4+2*n+168]
		default:
			l := binary.NativeEndian.Uint32(b[2*n+32:])
			x, y, hash, data = b[n-32:n], b[2*n-32:2*n], b[2*n:2*n+32], b[2*n+36:2*n+36+int(l)]
		}
		plain := append(append(append(append([]byte{4}, x...), y...), hash...), data...)
		pt, err := k.Decrypt(nil, plain, nil)
		if err != nil || !bytes.Equal(pt, msg) {
			t.Errorf("%s: the layout does not hold the ciphertext: %v", p.Name, err)
		}
		if len(b) != cipherBufLen {
			t.Errorf("%s: buffer of %d bytes", p.Name, len(b))
		}
	}
}

func TestParseCiphertextRejects(t *testing.T) {
	k := testKey(t)
	der, _ := sm2.EncryptASN1(rand.Reader, &k.PublicKey, make([]byte, 48))
	long, _ := sm2.EncryptASN1(rand.Reader, &k.PublicKey, make([]byte, maxCipherText+1))
	c, _ := parseCiphertext(der)
	build := func(x, y *big.Int, hash, data []byte) []byte {
		var b cryptobyte.Builder
		b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1BigInt(x)
			b.AddASN1BigInt(y)
			b.AddASN1OctetString(hash)
			b.AddASN1OctetString(data)
		})
		return b.BytesOrPanic()
	}
	x, y := new(big.Int).SetBytes(c.x), new(big.Int).SetBytes(c.y)
	tests := map[string][]byte{
		"empty":          nil,
		"truncated":      der[:len(der)-1],
		"trailing":       append(bytes.Clone(der), 0),
		"negative x":     build(new(big.Int).Neg(x), y, c.hash, c.c2),
		"x too large":    build(new(big.Int).Lsh(x, 8), y, c.hash, c.c2),
		"off the curve":  build(x, new(big.Int).Add(y, big.NewInt(1)), c.hash, c.c2),
		"short hash":     build(x, y, c.hash[:31], c.c2),
		"empty data":     build(x, y, c.hash, nil),
		"too much data":  long,
		"raw too short":  append([]byte{4}, make([]byte, 96)...),
		"not ciphertext": []byte("hello"),
	}
	for name, ct := range tests {
		if _, err := parseCiphertext(ct); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseCiphertext(f *testing.F) {
	k, _ := sm2.GenerateKey(rand.Reader)
	der, _ := sm2.EncryptASN1(rand.Reader, &k.PublicKey, make([]byte, 48))
	raw, _ := sm2.ASN1Ciphertext2Plain(der, nil)
	f.Add(der)
	f.Add(raw)
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, ct []byte) {
		c, err := parseCiphertext(ct)
		if err != nil {
			return
		}
		if len(c.x) != 32 || len(c.y) != 32 || len(c.hash) != 32 || len(c.c2) == 0 || len(c.c2) > maxCipherText {
			t.Fatalf("accepted a ciphertext with parts %d/%d/%d/%d", len(c.x), len(c.y), len(c.hash), len(c.c2))
		}
		for _, p := range testProfiles {
			if b := p.encodeCipher(c); len(b) != cipherBufLen {
				t.Fatalf("buffer of %d bytes", len(b))
			}
		}
	})
}

func TestCodeNames(t *testing.T) {
	e := &Error{Func: "SDF_InternalSign_ECC", Code: sdrCommFail}
	if got := e.Error(); got != "SDF_InternalSign_ECC returned SDR_COMMFAIL (0x01000003): communication with the device failed" {
		t.Errorf("got %q", got)
	}
	if !e.sessionFatal() || !e.deviceFatal() || e.unauthorised() {
		t.Error("SDR_COMMFAIL misclassified")
	}
	if got := CodeName(0x01020005); got != "vendor code 0x01020005" {
		t.Errorf("got %q", got)
	}
	p := &Error{Func: "SDF_InternalSign_ECC", Code: sdrParDeny}
	if !p.unauthorised() || p.sessionFatal() {
		t.Error("SDR_PARDENY misclassified")
	}
	if !(&Error{Code: sdrAlgNotSupport}).profileMismatch() {
		t.Error("SDR_ALGNOTSUPPORT misclassified")
	}
}

// BenchmarkDecryptPrep measures the host's part of a decryption: parsing
// the DER ciphertext, checking its point is on the curve, and laying out
// the ECCCipher.
func BenchmarkDecryptPrep(b *testing.B) {
	k := testKey(b)
	der, _ := sm2.EncryptASN1(rand.Reader, &k.PublicKey, make([]byte, 48))
	p := Profiles["standard"]
	for b.Loop() {
		c, err := parseCiphertext(der)
		if err != nil {
			b.Fatal(err)
		}
		p.encodeCipher(c)
	}
}

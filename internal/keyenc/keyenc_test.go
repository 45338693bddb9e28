package keyenc

import (
	"bytes"
	"crypto/rand"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/testopenssl"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

func plainSM2Key(t testing.TB) []byte {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := smx509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestEncryptDecryptBothFormats(t *testing.T) {
	plain := plainSM2Key(t)
	pw := []byte("correct horse")
	for _, tc := range []struct {
		format   Format
		prf      string
		withNULL bool
		readBy   []string
	}{
		{FormatGmSSL, "1.2.156.10197.1.401.2", false, []string{"gmgate", "GmSSL"}},
		{FormatTongsuo, "1.2.156.10197.1.401.3.1", true, []string{"gmgate", "Tongsuo"}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			der, err := Encrypt(plain, pw, tc.format, 1000)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Describe(der)
			if err != nil {
				t.Fatal(err)
			}
			if in.PRF.String() != tc.prf || in.PRFHasNULL != tc.withNULL || in.Iterations != 1000 || Name(in.Cipher) != "SM4-CBC" {
				t.Errorf("written as %s", in)
			}
			if got := in.ReadBy(); !slices.Equal(got, tc.readBy) {
				t.Errorf("read by %v, want %v", got, tc.readBy)
			}
			if !strings.Contains(in.String(), "hmacWithSM3 "+tc.prf) {
				t.Errorf("description %q does not name the PRF's OID", in)
			}
			got, err := Decrypt(der, pw)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("decrypt: %v", err)
			}
			if _, err := Decrypt(der, []byte("wrong")); !errors.Is(err, ErrWrongPassword) {
				t.Errorf("wrong password: %v", err)
			}
		})
	}
	if _, err := Encrypt(plain, nil, FormatGmSSL, 0); err == nil {
		t.Error("encrypted with an empty password")
	}
	if _, err := ParseFormat("openssl"); err == nil {
		t.Error("unknown format accepted")
	}
	if f, err := ParseFormat(""); err != nil || f != DefaultFormat {
		t.Errorf("default format %q, %v", f, err)
	}
}

// A ciphertext that is not whole cipher blocks, or an IV of another size
// than the block, is a damaged file: an error that says so, not a panic
// (gmsm's CBC panics on both) and not "wrong password".
func TestDamagedCiphertextIsAnError(t *testing.T) {
	der, err := Encrypt(plainSM2Key(t), []byte("pw"), FormatGmSSL, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(iv, ct []byte) ([]byte, []byte)
	}{
		{"ciphertext one byte short", func(iv, ct []byte) ([]byte, []byte) { return iv, ct[:len(ct)-1] }},
		{"IV one byte short", func(iv, ct []byte) ([]byte, []byte) { return iv[:len(iv)-1], ct }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decrypt(rewritePBES2(t, der, tc.change), []byte("pw"))
			var damaged *DamagedError
			if !errors.As(err, &damaged) || damaged.Cipher != "SM4-CBC" {
				t.Fatalf("got %v, want a DamagedError naming SM4-CBC", err)
			}
		})
	}
	// Untouched, it still decrypts.
	if _, err := Decrypt(rewritePBES2(t, der, func(iv, ct []byte) ([]byte, []byte) { return iv, ct }), []byte("pw")); err != nil {
		t.Fatal(err)
	}
}

// rewritePBES2 encodes der, a PBES2 EncryptedPrivateKeyInfo whose cipher
// takes an IV, again with the IV and ciphertext change returns.
func rewritePBES2(t *testing.T, der []byte, change func(iv, ct []byte) ([]byte, []byte)) []byte {
	t.Helper()
	var info, alg, params, kdf, cipherAlg cryptobyte.String
	var scheme, cipherOID asn1.ObjectIdentifier
	var iv, ct []byte
	s := cryptobyte.String(der)
	if !s.ReadASN1(&info, cbasn1.SEQUENCE) || !info.ReadASN1(&alg, cbasn1.SEQUENCE) ||
		!alg.ReadASN1ObjectIdentifier(&scheme) || !alg.ReadASN1(&params, cbasn1.SEQUENCE) ||
		!params.ReadASN1Element(&kdf, cbasn1.SEQUENCE) || !params.ReadASN1(&cipherAlg, cbasn1.SEQUENCE) ||
		!cipherAlg.ReadASN1ObjectIdentifier(&cipherOID) || !cipherAlg.ReadASN1Bytes(&iv, cbasn1.OCTET_STRING) ||
		!info.ReadASN1Bytes(&ct, cbasn1.OCTET_STRING) {
		t.Fatal("not a PBES2 key with an IV")
	}
	iv, ct = change(iv, ct)
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(scheme)
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddBytes(kdf)
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddASN1ObjectIdentifier(cipherOID)
					b.AddASN1OctetString(iv)
				})
			})
		})
		b.AddASN1OctetString(ct)
	})
	return b.BytesOrPanic()
}

// pbes2 builds an EncryptedPrivateKeyInfo by hand from the layout of RFC
// 8018, for algorithms this package does not write.
func pbes2(t *testing.T, kdf, prf, cipherOID asn1.ObjectIdentifier, iterations int64) []byte {
	t.Helper()
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidPBES2)
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddASN1ObjectIdentifier(kdf)
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
						b.AddASN1OctetString(make([]byte, 8))
						b.AddASN1Int64(iterations)
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
							b.AddASN1ObjectIdentifier(prf)
							b.AddASN1NULL()
						})
					})
				})
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddASN1ObjectIdentifier(cipherOID)
					b.AddASN1OctetString(make([]byte, 16))
				})
			})
		})
		b.AddASN1OctetString(make([]byte, 32))
	})
	return b.BytesOrPanic()
}

func TestUnsupportedAlgorithmIsNamed(t *testing.T) {
	aes := asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	for _, tc := range []struct {
		name string
		der  []byte
		want string
	}{
		{"PRF", pbes2(t, oidPBKDF2, asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 6}, aes, 2048), "PRF hmacWithMD5"},
		{"unknown PRF", pbes2(t, oidPBKDF2, asn1.ObjectIdentifier{1, 2, 3, 4}, aes, 2048), "PRF 1.2.3.4"},
		{"cipher", pbes2(t, oidPBKDF2, oidHMACSHA1, asn1.ObjectIdentifier{1, 2, 392, 200011, 61, 1, 1, 1, 2}, 2048), "cipher CAMELLIA-128-CBC"},
		{"KDF", pbes2(t, asn1.ObjectIdentifier{1, 2, 3}, oidHMACSHA1, aes, 2048), "key derivation 1.2.3"},
		{"iterations", pbes2(t, oidPBKDF2, oidHMACSHA1, aes, 1<<40), "iterations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decrypt(tc.der, []byte("pw"))
			var u *UnsupportedError
			if !errors.As(err, &u) || errors.Is(err, ErrWrongPassword) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an unsupported-algorithm error naming %q", err, tc.want)
			}
			in, _ := Describe(tc.der)
			if slices.Contains(in.ReadBy(), "gmgate") {
				t.Errorf("ReadBy claims gmgate reads it: %v", in.ReadBy())
			}
		})
	}
	if _, err := Decrypt([]byte{0x30, 0x03, 0x02, 0x01}, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated: %v", err)
	}
}

var (
	needOpenSSL = testopenssl.Bin
	openssl     = testopenssl.Run
)

// pbkdf2SM3 derives a 16-byte key with OpenSSL's PBKDF2 and SM3.
func pbkdf2SM3(t *testing.T, bin, dir, password string, salt []byte, iterations int) string {
	out := openssl(t, bin, dir, "kdf", "-keylen", "16", "-kdfopt", "digest:SM3", "-kdfopt", "pass:"+password,
		"-kdfopt", "hexsalt:"+hex.EncodeToString(salt), "-kdfopt", fmt.Sprintf("iter:%d", iterations), "PBKDF2")
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(out), ":", ""))
}

// A key in Tongsuo's layout, made with OpenSSL alone from RFC 8018 and the
// Tongsuo PRF identifier: PBKDF2-HMAC-SM3 by `openssl kdf`, SM4-CBC by
// `openssl enc`, the structure by `openssl asn1parse -genconf`.
func TestReadsTongsuoKeyBuiltWithOpenSSL(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	const password = "tongsuo-pw"
	openssl(t, bin, dir, "genpkey", "-algorithm", "SM2", "-out", "key.pem")
	openssl(t, bin, dir, "pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "plain.der")
	salt, iv := make([]byte, 8), make([]byte, 16)
	rand.Read(salt)
	rand.Read(iv)
	key := pbkdf2SM3(t, bin, dir, password, salt, 2048)
	openssl(t, bin, dir, "enc", "-sm4-cbc", "-K", key, "-iv", hex.EncodeToString(iv), "-in", "plain.der", "-out", "ct.bin")
	ct, err := os.ReadFile(filepath.Join(dir, "ct.bin"))
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`asn1 = SEQUENCE:epki
[epki]
alg = SEQUENCE:alg
data = FORMAT:HEX,OCTETSTRING:%x
[alg]
oid = OID:1.2.840.113549.1.5.13
params = SEQUENCE:pbes2
[pbes2]
kdf = SEQUENCE:kdf
enc = SEQUENCE:enc
[kdf]
oid = OID:1.2.840.113549.1.5.12
params = SEQUENCE:pbkdf2
[pbkdf2]
salt = FORMAT:HEX,OCTETSTRING:%x
iter = INTEGER:2048
prf = SEQUENCE:prf
[prf]
oid = OID:1.2.156.10197.1.401.3.1
params = NULL
[enc]
oid = OID:1.2.156.10197.1.104.2
iv = FORMAT:HEX,OCTETSTRING:%x
`, ct, salt, iv)
	if err := os.WriteFile(filepath.Join(dir, "tongsuo.cnf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	openssl(t, bin, dir, "asn1parse", "-genconf", "tongsuo.cnf", "-noout", "-out", "tongsuo.der")
	der, err := os.ReadFile(filepath.Join(dir, "tongsuo.der"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "plain.der"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decrypt(der, []byte(password))
	if err != nil {
		t.Fatalf("Tongsuo-layout key: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("decrypted key differs from the key OpenSSL generated")
	}
	in, err := Describe(der)
	if err != nil {
		t.Fatal(err)
	}
	if rb := in.ReadBy(); !slices.Equal(rb, []string{"gmgate", "Tongsuo"}) {
		t.Errorf("read by %v", rb)
	}
	if _, err := Decrypt(der, []byte("not it")); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("wrong password: %v", err)
	}
}

// What Encrypt writes, taken apart with encoding/asn1 and decrypted with
// OpenSSL's PBKDF2-SM3 and SM4-CBC, gives back the key.
func TestOpenSSLDecryptsWhatEncryptWrites(t *testing.T) {
	bin := needOpenSSL(t)
	plain := plainSM2Key(t)
	const password = "pw for openssl"
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			der, err := Encrypt(plain, []byte(password), f, 2048)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "k.der"), der, 0o600)
			dump := openssl(t, bin, dir, "asn1parse", "-inform", "DER", "-in", "k.der")
			prf := map[Format]string{FormatGmSSL: ":1.2.156.10197.1.401.2\n", FormatTongsuo: ":1.2.156.10197.1.401.3.1\n"}[f]
			if !strings.Contains(dump, prf) || !strings.Contains(dump, ":PBKDF2") || !strings.Contains(dump, ":sm4-cbc") {
				t.Fatalf("structure:\n%s", dump)
			}
			if hasNULL := strings.Contains(dump, "NULL"); hasNULL != (f == FormatTongsuo) {
				t.Errorf("NULL PRF parameters: %v\n%s", hasNULL, dump)
			}
			var epki struct {
				Alg struct {
					OID    asn1.ObjectIdentifier
					Params struct {
						KDF struct {
							OID    asn1.ObjectIdentifier
							Params struct {
								Salt       []byte
								Iterations int
								Rest       asn1.RawValue `asn1:"optional"`
								PRF        asn1.RawValue `asn1:"optional"`
							}
						}
						Enc struct {
							OID asn1.ObjectIdentifier
							IV  []byte
						}
					}
				}
				Data []byte
			}
			if _, err := asn1.Unmarshal(der, &epki); err != nil {
				t.Fatal(err)
			}
			p := epki.Alg.Params
			os.WriteFile(filepath.Join(dir, "ct.bin"), epki.Data, 0o600)
			key := pbkdf2SM3(t, bin, dir, password, p.KDF.Params.Salt, p.KDF.Params.Iterations)
			openssl(t, bin, dir, "enc", "-d", "-sm4-cbc", "-K", key, "-iv", hex.EncodeToString(p.Enc.IV), "-in", "ct.bin", "-out", "plain.der")
			got, err := os.ReadFile(filepath.Join(dir, "plain.der"))
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("OpenSSL's decryption differs from the key (%v)", err)
			}
		})
	}
}

// Keys OpenSSL 3 writes with its own choices: SHA-2 PRFs, SM4 or AES,
// scrypt.
func TestReadsOpenSSLKeys(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	openssl(t, bin, dir, "genpkey", "-algorithm", "SM2", "-out", "key.pem")
	openssl(t, bin, dir, "pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "plain.der")
	want, _ := os.ReadFile(filepath.Join(dir, "plain.der"))
	for _, args := range [][]string{
		{"-v2", "sm4-cbc"},
		{"-v2", "aes-256-cbc", "-v2prf", "hmacWithSHA512"},
		{"-v2", "des3"},
		{"-scrypt", "-scrypt_N", "1024"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			openssl(t, bin, dir, append([]string{"pkcs8", "-topk8", "-in", "key.pem", "-passout", "pass:pw", "-outform", "DER", "-out", "enc.der"}, args...)...)
			der, _ := os.ReadFile(filepath.Join(dir, "enc.der"))
			got, err := Decrypt(der, []byte("pw"))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decrypt: %v", err)
			}
			in, _ := Describe(der)
			if args[0] == "-v2" && !slices.Contains(in.ReadBy(), "OpenSSL 3") {
				t.Errorf("%s: read by %v", in, in.ReadBy())
			}
		})
	}
}

func FuzzDescribe(f *testing.F) {
	plain := plainSM2Key(f)
	for _, format := range Formats {
		der, err := Encrypt(plain, []byte("pw"), format, 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(der)
	}
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		in, err := Describe(der)
		if err != nil {
			return
		}
		_ = in.String()
		_ = in.ReadBy()
		// Decrypt only what is cheap to derive.
		if in.Iterations <= 16 && in.ScryptN <= 16 && in.ScryptR <= 8 && in.ScryptP <= 1 {
			_, _ = Decrypt(der, []byte("pw"))
		}
	})
}

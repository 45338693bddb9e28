// Package keyenc reads and writes password-encrypted PKCS#8 private keys
// (EncryptedPrivateKeyInfo, RFC 5958 with the PBES2 scheme of RFC 8018)
// the way the GM tool chains do, and says which tools read a given key.
//
// The SM3 PRF of PBKDF2 has two object identifiers in use: GmSSL (and
// gmsm) write and read hmacWithSM3 as 1.2.156.10197.1.401.2; Tongsuo, and
// GM/T 0091-2020 appendix A, use 1.2.156.10197.1.401.3.1. Each reads only
// its own. Decrypt reads both; Encrypt writes the one of the chosen Format.
//
// Errors tell a wrong password (ErrWrongPassword) from an algorithm this
// package does not implement (*UnsupportedError, naming it); neither ever
// contains the password or key material.
package keyenc

import (
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/emmansun/gmsm/pkcs"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
	"github.com/emmansun/gmsm/smx509"
	// Switches gmsm's single-block SM4 (CMAC, CBC encryption, GCM's
	// tag mask) to its AES-instruction code where the CPU has it.
	_ "github.com/gmgate/gmgate/internal/cpufeat"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
	"golang.org/x/crypto/scrypt"
)

// Format is the layout Encrypt writes: which tool chain reads the key.
type Format string

const (
	// FormatGmSSL writes PRF hmacWithSM3 as 1.2.156.10197.1.401.2 without
	// parameters: read by GmSSL 3, gmsm and gmgate, not by Tongsuo.
	FormatGmSSL Format = "gmssl"
	// FormatTongsuo writes PRF hmacWithSM3 as 1.2.156.10197.1.401.3.1
	// with NULL parameters, as Tongsuo does: read by Tongsuo and gmgate,
	// not by GmSSL.
	FormatTongsuo Format = "tongsuo"
	// DefaultFormat is what gmgate writes unless told otherwise.
	DefaultFormat = FormatGmSSL
)

// Formats lists the formats, for flag help and errors.
var Formats = []Format{FormatGmSSL, FormatTongsuo}

// ParseFormat reads a format name; "" is DefaultFormat.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(strings.TrimSpace(s))) {
	case "":
		return DefaultFormat, nil
	case FormatGmSSL:
		return FormatGmSSL, nil
	case FormatTongsuo:
		return FormatTongsuo, nil
	}
	return "", fmt.Errorf("key format %q: give %s (GmSSL, gmsm) or %s (Tongsuo)", s, FormatGmSSL, FormatTongsuo)
}

// Object identifiers.
var (
	oidPBES2   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidScrypt  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11591, 4, 11}
	oidSM4CBC  = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 104, 2}
	oidHMACSM3 = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401, 2}
	// oidHMACSM3Tongsuo is hmacWithSM3 as Tongsuo and GM/T 0091-2020
	// (appendix A) number it.
	oidHMACSM3Tongsuo = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401, 3, 1}
	oidHMACSHA1       = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	// The GM/T 0091 names of PBES2 and PBKDF2, under two arcs seen in
	// the wild (the standard's and gmsm's); the PRF defaults to SM3.
	oidSMPBES   = []asn1.ObjectIdentifier{{1, 2, 156, 10197, 6, 1, 4, 1, 5, 2}, {1, 2, 156, 10197, 6, 4, 1, 5, 2}}
	oidSMPBKDF2 = []asn1.ObjectIdentifier{{1, 2, 156, 10197, 6, 1, 4, 1, 5, 1}, {1, 2, 156, 10197, 6, 4, 1, 5, 1}}
)

func oneOf(oid asn1.ObjectIdentifier, list ...asn1.ObjectIdentifier) bool {
	for _, o := range list {
		if oid.Equal(o) {
			return true
		}
	}
	return false
}

// prf is a PBKDF2 pseudo-random function this package implements.
type prf struct {
	name string
	hash func() hash.Hash
}

var prfs = map[string]prf{
	"1.2.840.113549.2.7":       {"hmacWithSHA1", sha1.New},
	"1.2.840.113549.2.8":       {"hmacWithSHA224", sha256.New224},
	"1.2.840.113549.2.9":       {"hmacWithSHA256", sha256.New},
	"1.2.840.113549.2.10":      {"hmacWithSHA384", sha512.New384},
	"1.2.840.113549.2.11":      {"hmacWithSHA512", sha512.New},
	"1.2.840.113549.2.12":      {"hmacWithSHA512-224", sha512.New512_224},
	"1.2.840.113549.2.13":      {"hmacWithSHA512-256", sha512.New512_256},
	"2.16.840.1.101.3.4.2.13":  {"hmacWithSHA3-224", func() hash.Hash { return sha3.New224() }},
	"2.16.840.1.101.3.4.2.14":  {"hmacWithSHA3-256", func() hash.Hash { return sha3.New256() }},
	"2.16.840.1.101.3.4.2.15":  {"hmacWithSHA3-384", func() hash.Hash { return sha3.New384() }},
	"2.16.840.1.101.3.4.2.16":  {"hmacWithSHA3-512", func() hash.Hash { return sha3.New512() }},
	oidHMACSM3.String():        {"hmacWithSM3", sm3.New},
	oidHMACSM3Tongsuo.String(): {"hmacWithSM3", sm3.New},
}

// names of the other algorithms, for descriptions.
var names = map[string]string{
	oidPBES2.String():           "PBES2",
	oidPBKDF2.String():          "PBKDF2",
	oidScrypt.String():          "scrypt",
	oidSM4CBC.String():          "SM4-CBC",
	"1.2.156.10197.1.104.1":     "SM4-ECB",
	"1.2.156.10197.1.104.8":     "SM4-GCM",
	"2.16.840.1.101.3.4.1.2":    "AES-128-CBC",
	"2.16.840.1.101.3.4.1.22":   "AES-192-CBC",
	"2.16.840.1.101.3.4.1.42":   "AES-256-CBC",
	"2.16.840.1.101.3.4.1.6":    "AES-128-GCM",
	"2.16.840.1.101.3.4.1.26":   "AES-192-GCM",
	"2.16.840.1.101.3.4.1.46":   "AES-256-GCM",
	"1.2.840.113549.3.7":        "DES-EDE3-CBC",
	"1.3.14.3.2.7":              "DES-CBC",
	"1.2.840.113549.3.2":        "RC2-CBC",
	"1.2.392.200011.61.1.1.1.2": "CAMELLIA-128-CBC",
	"1.2.392.200011.61.1.1.1.3": "CAMELLIA-192-CBC",
	"1.2.392.200011.61.1.1.1.4": "CAMELLIA-256-CBC",
	"1.2.840.113549.2.6":        "hmacWithMD5",
	"1.2.840.113549.1.5.1":      "pbeWithMD2AndDES-CBC",
	"1.2.840.113549.1.5.3":      "pbeWithMD5AndDES-CBC",
	"1.2.840.113549.1.5.4":      "pbeWithMD2AndRC2-CBC",
	"1.2.840.113549.1.5.6":      "pbeWithMD5AndRC2-CBC",
	"1.2.840.113549.1.5.10":     "pbeWithSHA1AndDES-CBC",
	"1.2.840.113549.1.5.11":     "pbeWithSHA1AndRC2-CBC",
	"1.2.840.113549.1.12.1.3":   "pbeWithSHAAnd3-KeyTripleDES-CBC",
	"1.2.840.113549.1.12.1.6":   "pbeWithSHAAnd40BitRC2-CBC",
}

func init() {
	for _, o := range oidSMPBES {
		names[o.String()] = "PBES2 (GM/T 0091)"
	}
	for _, o := range oidSMPBKDF2 {
		names[o.String()] = "PBKDF2 (GM/T 0091)"
	}
}

// Name names an algorithm by its object identifier, or returns the
// identifier when it has no name here.
func Name(oid asn1.ObjectIdentifier) string {
	if p, ok := prfs[oid.String()]; ok {
		return p.name
	}
	if n, ok := names[oid.String()]; ok {
		return n
	}
	return oid.String()
}

// Limits on what a key file may ask of the key derivation, so that a
// hostile file cannot take minutes or gigabytes.
const (
	maxIterations  = 10_000_000
	maxScryptBytes = 1 << 30 // 128 * N * r * p
)

// ErrWrongPassword says that the key did not decrypt with the password:
// the algorithms are known, the result is not a private key.
var ErrWrongPassword = errors.New("wrong password (or a damaged key file)")

// DamagedError says that the encrypted key does not fit its cipher: its
// length is not a whole number of the cipher's blocks, or its IV is not
// one block long.
type DamagedError struct {
	Cipher string
}

func (e *DamagedError) Error() string {
	return "damaged key file: the encrypted key does not fit " + e.Cipher + " (not whole cipher blocks, or an IV of the wrong size); export the key again from where it came from"
}

// ErrMalformed says that the structure is not an EncryptedPrivateKeyInfo.
var ErrMalformed = errors.New("malformed EncryptedPrivateKeyInfo")

// UnsupportedError names an algorithm of a key's encryption that this
// package does not implement.
type UnsupportedError struct {
	// Role is "scheme", "key derivation", "PRF" or "cipher".
	Role string
	// Algorithm is its name, or its object identifier.
	Algorithm string
	// Detail, when set, says what about it is out of reach.
	Detail string
}

func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("the key is encrypted with %s %s, which gmgate does not implement", e.Role, e.Algorithm)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Supported says what Decrypt reads, for error messages.
const Supported = "PBES2 with PBKDF2 (PRF hmacWithSM3 under either OID, SHA-1, SHA-2 or SHA-3) or scrypt, and SM4, AES or 3DES; PBES1 (MD5/SHA-1 with DES or RC2)"

// Info describes an EncryptedPrivateKeyInfo without decrypting it.
type Info struct {
	Scheme asn1.ObjectIdentifier
	KDF    asn1.ObjectIdentifier // PBES2 only
	// PRF is the PBKDF2 PRF; nil when the file leaves it to the default
	// (hmacWithSHA1, or hmacWithSM3 under the GM/T 0091 KDF OID).
	PRF        asn1.ObjectIdentifier
	PRFHasNULL bool
	Cipher     asn1.ObjectIdentifier // PBES2 only
	Iterations int64                 // PBKDF2 only
	KeyLength  int64                 // PBKDF2, when written
	// scrypt parameters.
	ScryptN, ScryptR, ScryptP int64

	salt       []byte
	cipherAlg  pkix.AlgorithmIdentifier
	encrypted  []byte
	schemeAlg  pkix.AlgorithmIdentifier
	isPBES2    bool
	isSMScheme bool
}

// String describes the encryption: "PBES2, PBKDF2 (hmacWithSM3, 65536
// iterations), SM4-CBC".
func (in Info) String() string {
	if !in.isPBES2 {
		return Name(in.Scheme)
	}
	kdf := Name(in.KDF)
	switch {
	case oneOf(in.KDF, oidScrypt):
		kdf += fmt.Sprintf(" (N=%d, r=%d, p=%d)", in.ScryptN, in.ScryptR, in.ScryptP)
	default:
		kdf += fmt.Sprintf(" (%s, %d iterations)", in.prfName(), in.Iterations)
	}
	s := fmt.Sprintf("%s, %s, %s", Name(in.Scheme), kdf, Name(in.Cipher))
	if in.PRFHasNULL {
		s += ", PRF written with NULL parameters"
	}
	return s
}

// prfName names the PRF, with the OID where the name alone is ambiguous.
func (in Info) prfName() string {
	switch {
	case in.PRF == nil && oneOf(in.KDF, oidSMPBKDF2...):
		return "hmacWithSM3 (default)"
	case in.PRF == nil:
		return "hmacWithSHA1 (default)"
	case in.PRF.Equal(oidHMACSM3) || in.PRF.Equal(oidHMACSM3Tongsuo):
		return "hmacWithSM3 " + in.PRF.String()
	}
	return Name(in.PRF)
}

// ReadBy lists the tools that read a key encrypted this way: "gmgate"
// when this package decrypts it, and GmSSL 3, Tongsuo and OpenSSL 3.0 by
// what each implements.
func (in Info) ReadBy() []string {
	var out []string
	if in.supported() == nil {
		out = append(out, "gmgate")
	}
	plainPBKDF2 := in.isPBES2 && !in.isSMScheme && in.KDF.Equal(oidPBKDF2)
	prf := in.PRF
	if prf == nil {
		prf = oidHMACSHA1
	}
	sm4 := in.Cipher.Equal(oidSM4CBC)
	// GmSSL 3: PBKDF2 with its hmacWithSM3 (no parameters) and SM4-CBC.
	if plainPBKDF2 && prf.Equal(oidHMACSM3) && !in.PRFHasNULL && sm4 {
		out = append(out, "GmSSL")
	}
	// Tongsuo (an OpenSSL fork): its PRF table has SHA-1, SHA-2 and its
	// own hmacWithSM3 OID.
	if plainPBKDF2 && (prf.Equal(oidHMACSM3Tongsuo) || isSHAPRF(prf)) && isOpenSSLCipher(in.Cipher) {
		out = append(out, "Tongsuo")
	}
	// OpenSSL 3.0: no SM3 PRF at all.
	if plainPBKDF2 && isSHAPRF(prf) && isOpenSSLCipher(in.Cipher) {
		out = append(out, "OpenSSL 3")
	}
	return out
}

func isSHAPRF(oid asn1.ObjectIdentifier) bool {
	p, ok := prfs[oid.String()]
	return ok && strings.HasPrefix(p.name, "hmacWithSHA") && !strings.HasPrefix(p.name, "hmacWithSHA3")
}

func isOpenSSLCipher(oid asn1.ObjectIdentifier) bool {
	switch Name(oid) {
	case "SM4-CBC", "AES-128-CBC", "AES-192-CBC", "AES-256-CBC", "DES-EDE3-CBC":
		return true
	}
	return false
}

// Describe reads the algorithm identifiers of a DER
// EncryptedPrivateKeyInfo. It never panics on malformed input.
func Describe(der []byte) (Info, error) {
	var in Info
	s := cryptobyte.String(der)
	var epki, algSeq, encrypted cryptobyte.String
	if !s.ReadASN1(&epki, cbasn1.SEQUENCE) || !epki.ReadASN1Element(&algSeq, cbasn1.SEQUENCE) ||
		!epki.ReadASN1(&encrypted, cbasn1.OCTET_STRING) {
		return in, ErrMalformed
	}
	in.encrypted = encrypted
	if rest, err := asn1.Unmarshal(algSeq, &in.schemeAlg); err != nil || len(rest) > 0 {
		return in, ErrMalformed
	}
	in.Scheme = in.schemeAlg.Algorithm
	in.isSMScheme = oneOf(in.Scheme, oidSMPBES...)
	in.isPBES2 = in.Scheme.Equal(oidPBES2) || in.isSMScheme
	if !in.isPBES2 {
		return in, nil
	}
	params := cryptobyte.String(in.schemeAlg.Parameters.FullBytes)
	var pbes2, kdfAlg, encAlg cryptobyte.String
	if !params.ReadASN1(&pbes2, cbasn1.SEQUENCE) || !pbes2.ReadASN1(&kdfAlg, cbasn1.SEQUENCE) ||
		!kdfAlg.ReadASN1ObjectIdentifier(&in.KDF) || !pbes2.ReadASN1Element(&encAlg, cbasn1.SEQUENCE) {
		return in, ErrMalformed
	}
	if rest, err := asn1.Unmarshal(encAlg, &in.cipherAlg); err != nil || len(rest) > 0 {
		return in, ErrMalformed
	}
	in.Cipher = in.cipherAlg.Algorithm
	switch {
	case in.KDF.Equal(oidPBKDF2) || oneOf(in.KDF, oidSMPBKDF2...):
		var p, salt cryptobyte.String
		if !kdfAlg.ReadASN1(&p, cbasn1.SEQUENCE) || !p.ReadASN1(&salt, cbasn1.OCTET_STRING) ||
			!p.ReadASN1Int64WithTag(&in.Iterations, cbasn1.INTEGER) {
			return in, ErrMalformed
		}
		in.salt = salt
		if p.PeekASN1Tag(cbasn1.INTEGER) && !p.ReadASN1Int64WithTag(&in.KeyLength, cbasn1.INTEGER) {
			return in, ErrMalformed
		}
		if p.PeekASN1Tag(cbasn1.SEQUENCE) {
			var prfAlg cryptobyte.String
			var oid asn1.ObjectIdentifier
			if !p.ReadASN1(&prfAlg, cbasn1.SEQUENCE) || !prfAlg.ReadASN1ObjectIdentifier(&oid) {
				return in, ErrMalformed
			}
			in.PRF = oid
			in.PRFHasNULL = prfAlg.PeekASN1Tag(cbasn1.NULL)
		}
	case in.KDF.Equal(oidScrypt):
		var p, salt cryptobyte.String
		if !kdfAlg.ReadASN1(&p, cbasn1.SEQUENCE) || !p.ReadASN1(&salt, cbasn1.OCTET_STRING) ||
			!p.ReadASN1Int64WithTag(&in.ScryptN, cbasn1.INTEGER) || !p.ReadASN1Int64WithTag(&in.ScryptR, cbasn1.INTEGER) ||
			!p.ReadASN1Int64WithTag(&in.ScryptP, cbasn1.INTEGER) {
			return in, ErrMalformed
		}
		in.salt = salt
		if p.PeekASN1Tag(cbasn1.INTEGER) && !p.ReadASN1Int64WithTag(&in.KeyLength, cbasn1.INTEGER) {
			return in, ErrMalformed
		}
	}
	return in, nil
}

// supported returns nil when Decrypt implements every algorithm of the
// key, else what it lacks.
func (in Info) supported() *UnsupportedError {
	if !in.isPBES2 {
		if pkcs.IsPBES1(in.schemeAlg) {
			return nil
		}
		return &UnsupportedError{Role: "scheme", Algorithm: Name(in.Scheme)}
	}
	switch {
	case in.KDF.Equal(oidPBKDF2) || oneOf(in.KDF, oidSMPBKDF2...):
		if in.PRF != nil {
			if _, ok := prfs[in.PRF.String()]; !ok {
				return &UnsupportedError{Role: "PRF", Algorithm: Name(in.PRF)}
			}
		}
		if in.Iterations < 1 || in.Iterations > maxIterations {
			return &UnsupportedError{Role: "key derivation", Algorithm: "PBKDF2", Detail: fmt.Sprintf("%d iterations; gmgate reads 1 to %d", in.Iterations, maxIterations)}
		}
	case in.KDF.Equal(oidScrypt):
		n, r, p := in.ScryptN, in.ScryptR, in.ScryptP
		if n < 2 || n&(n-1) != 0 || r < 1 || p < 1 || r > 1<<20 || p > 1<<20 || n > maxScryptBytes/128 || 128*n*r*p > maxScryptBytes {
			return &UnsupportedError{Role: "key derivation", Algorithm: "scrypt", Detail: fmt.Sprintf("N=%d, r=%d, p=%d needs more than 1 GiB or is invalid", n, r, p)}
		}
	default:
		return &UnsupportedError{Role: "key derivation", Algorithm: Name(in.KDF)}
	}
	if _, err := pkcs.GetCipher(in.cipherAlg); err != nil {
		return &UnsupportedError{Role: "cipher", Algorithm: Name(in.Cipher)}
	}
	return nil
}

// Decrypt decrypts a DER EncryptedPrivateKeyInfo and returns the DER
// PKCS#8 PrivateKeyInfo inside, checked to parse as a private key.
func Decrypt(der, password []byte) ([]byte, error) {
	in, err := Describe(der)
	if err != nil {
		return nil, err
	}
	if u := in.supported(); u != nil {
		return nil, u
	}
	var plain []byte
	if !in.isPBES2 {
		pbes1 := &pkcs.PBES1{Algorithm: in.schemeAlg}
		plain, err = in.decryptWith(func() ([]byte, error) {
			p, _, err := pbes1.Decrypt(password, in.encrypted)
			return p, err
		})
		if err != nil {
			return nil, err
		}
	} else {
		c, _ := pkcs.GetCipher(in.cipherAlg)
		key, err := in.deriveKey(password, c.KeySize())
		if err != nil {
			return nil, err
		}
		plain, err = in.decryptWith(func() ([]byte, error) {
			return c.Decrypt(key, &in.cipherAlg.Parameters, in.encrypted)
		})
		if err != nil {
			return nil, err
		}
	}
	if _, err := smx509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, ErrWrongPassword
	}
	return plain, nil
}

// decryptWith runs one of gmsm's decryptions of in's ciphertext: a
// failure is ErrWrongPassword. gmsm's block-mode ciphers panic on a
// ciphertext that is not a whole number of blocks, or an IV of another
// size than the block, which only a damaged file holds: that is an error
// that says so, never a panic.
func (in Info) decryptWith(decrypt func() ([]byte, error)) (plain []byte, err error) {
	defer func() {
		if recover() != nil {
			plain, err = nil, &DamagedError{Cipher: in.cipherName()}
		}
	}()
	if plain, err = decrypt(); err != nil {
		return nil, ErrWrongPassword
	}
	return plain, nil
}

// cipherName names the cipher that encrypted the key.
func (in Info) cipherName() string {
	if !in.isPBES2 {
		return Name(in.Scheme)
	}
	return Name(in.Cipher)
}

func (in Info) deriveKey(password []byte, size int) ([]byte, error) {
	if in.KeyLength > 0 && in.KeyLength != int64(size) {
		return nil, fmt.Errorf("the key derivation asks for %d bytes, but %s takes %d", in.KeyLength, Name(in.Cipher), size)
	}
	if in.KDF.Equal(oidScrypt) {
		return scrypt.Key(password, in.salt, int(in.ScryptN), int(in.ScryptR), int(in.ScryptP), size)
	}
	h := sha1.New
	switch {
	case in.PRF != nil:
		h = prfs[in.PRF.String()].hash
	case oneOf(in.KDF, oidSMPBKDF2...):
		h = sm3.New
	}
	return pbkdf2.Key(h, string(password), in.salt, int(in.Iterations), size)
}

// DefaultIterations is the PBKDF2 iteration count Encrypt uses.
const DefaultIterations = 65536

// Encrypt wraps a DER PKCS#8 PrivateKeyInfo as an EncryptedPrivateKeyInfo:
// PBES2 with PBKDF2 (PRF hmacWithSM3 under the OID of the format) and
// SM4-CBC, with a random 16-byte salt and IV. iterations 0 means
// DefaultIterations.
func Encrypt(plain, password []byte, format Format, iterations int) ([]byte, error) {
	if len(password) == 0 {
		return nil, errors.New("empty password for key encryption")
	}
	if iterations <= 0 {
		iterations = DefaultIterations
	}
	prfOID, withNULL, writeKeyLen := oidHMACSM3, false, true
	switch format {
	case "", FormatGmSSL:
	case FormatTongsuo:
		// As OpenSSL and Tongsuo write PBKDF2: the PRF with NULL
		// parameters, no key length.
		prfOID, withNULL, writeKeyLen = oidHMACSM3Tongsuo, true, false
	default:
		return nil, fmt.Errorf("unknown key format %q", format)
	}
	salt := make([]byte, 16)
	iv := make([]byte, sm4.BlockSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	const keyLen = 16
	key, err := pbkdf2.Key(sm3.New, string(password), salt, iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := sm4.NewCipher(key)
	if err != nil {
		return nil, err
	}
	padLen := sm4.BlockSize - len(plain)%sm4.BlockSize
	buf := make([]byte, len(plain)+padLen)
	copy(buf, plain)
	for i := len(plain); i < len(buf); i++ {
		buf[i] = byte(padLen)
	}
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(buf, buf)

	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // EncryptedPrivateKeyInfo
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // encryptionAlgorithm
			b.AddASN1ObjectIdentifier(oidPBES2)
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // PBES2-params
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // keyDerivationFunc
					b.AddASN1ObjectIdentifier(oidPBKDF2)
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // PBKDF2-params
						b.AddASN1OctetString(salt)
						b.AddASN1Int64(int64(iterations))
						if writeKeyLen {
							b.AddASN1Int64(keyLen)
						}
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // prf
							b.AddASN1ObjectIdentifier(prfOID)
							if withNULL {
								b.AddASN1NULL()
							}
						})
					})
				})
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // encryptionScheme
					b.AddASN1ObjectIdentifier(oidSM4CBC)
					b.AddASN1OctetString(iv)
				})
			})
		})
		b.AddASN1OctetString(buf)
	})
	return b.Bytes()
}

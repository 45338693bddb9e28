package certs

import (
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// Object identifiers of the encrypted PKCS#8 layout that GmSSL, Tongsuo
// and OpenSSL all read.
var (
	oidPBES2       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACWithSM3 = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401, 2}
	oidSM4CBC      = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 104, 2}
)

// keyEncryptionIterations is the PBKDF2 iteration count of keys written
// encrypted. A variable so that tests can make it cheap.
var keyEncryptionIterations = 65536

// encryptPKCS8 wraps a DER PKCS#8 PrivateKeyInfo as an
// EncryptedPrivateKeyInfo: PBES2 with PBKDF2 (PRF hmacWithSM3, written
// without NULL parameters, as GmSSL requires) and SM4-CBC.
func encryptPKCS8(plain, password []byte) ([]byte, error) {
	if len(password) == 0 {
		return nil, errors.New("empty password for key encryption")
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
	key, err := pbkdf2.Key(sm3.New, string(password), salt, keyEncryptionIterations, keyLen)
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
						b.AddASN1Int64(int64(keyEncryptionIterations))
						b.AddASN1Int64(keyLen)
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // prf
							b.AddASN1ObjectIdentifier(oidHMACWithSM3)
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

// encryptedKeyInfo describes an EncryptedPrivateKeyInfo without
// decrypting it, for inspection.
type encryptedKeyInfo struct {
	Scheme     string // "PBES2" or the OID
	KDF        string // "PBKDF2" or the OID
	PRF        string // "hmacWithSM3", "hmacWithSHA256", ...
	PRFHasNULL bool   // the PRF identifier carries NULL parameters (GmSSL rejects that)
	Cipher     string // "SM4-CBC", "AES-256-CBC", ...
	Iterations int64
}

// GmSSLCompatible reports whether GmSSL reads a key encrypted this way.
func (e encryptedKeyInfo) GmSSLCompatible() bool {
	return e.Scheme == "PBES2" && e.KDF == "PBKDF2" && e.PRF == "hmacWithSM3" && !e.PRFHasNULL && e.Cipher == "SM4-CBC"
}

func (e encryptedKeyInfo) String() string {
	s := fmt.Sprintf("%s, %s (%s, %d iterations), %s", e.Scheme, e.KDF, e.PRF, e.Iterations, e.Cipher)
	if e.PRFHasNULL {
		s += ", PRF written with NULL parameters"
	}
	return s
}

var algorithmNames = map[string]string{
	oidPBES2.String():         "PBES2",
	oidPBKDF2.String():        "PBKDF2",
	oidHMACWithSM3.String():   "hmacWithSM3",
	oidSM4CBC.String():        "SM4-CBC",
	"1.2.840.113549.2.7":      "hmacWithSHA1",
	"1.2.840.113549.2.9":      "hmacWithSHA256",
	"1.2.840.113549.2.10":     "hmacWithSHA384",
	"1.2.840.113549.2.11":     "hmacWithSHA512",
	"2.16.840.1.101.3.4.1.2":  "AES-128-CBC",
	"2.16.840.1.101.3.4.1.22": "AES-192-CBC",
	"2.16.840.1.101.3.4.1.42": "AES-256-CBC",
	"1.2.840.113549.3.7":      "DES-EDE3-CBC",
	"1.3.6.1.4.1.11591.4.11":  "scrypt",
}

func algorithmName(oid asn1.ObjectIdentifier) string {
	if n, ok := algorithmNames[oid.String()]; ok {
		return n
	}
	return oid.String()
}

// describeEncryptedPKCS8 reads the algorithm identifiers of an
// EncryptedPrivateKeyInfo. It is lenient: fields it does not understand
// are reported by OID, and a malformed structure is an error, never a
// panic.
func describeEncryptedPKCS8(der []byte) (encryptedKeyInfo, error) {
	var info encryptedKeyInfo
	bad := errors.New("malformed EncryptedPrivateKeyInfo")
	in := cryptobyte.String(der)
	var epki, alg cryptobyte.String
	var scheme asn1.ObjectIdentifier
	if !in.ReadASN1(&epki, cbasn1.SEQUENCE) || !epki.ReadASN1(&alg, cbasn1.SEQUENCE) || !alg.ReadASN1ObjectIdentifier(&scheme) {
		return info, bad
	}
	info.Scheme = algorithmName(scheme)
	if !scheme.Equal(oidPBES2) {
		return info, nil
	}
	var params, kdfAlg, encAlg cryptobyte.String
	var kdf, enc asn1.ObjectIdentifier
	if !alg.ReadASN1(&params, cbasn1.SEQUENCE) || !params.ReadASN1(&kdfAlg, cbasn1.SEQUENCE) || !kdfAlg.ReadASN1ObjectIdentifier(&kdf) ||
		!params.ReadASN1(&encAlg, cbasn1.SEQUENCE) || !encAlg.ReadASN1ObjectIdentifier(&enc) {
		return info, bad
	}
	info.KDF = algorithmName(kdf)
	info.Cipher = algorithmName(enc)
	if !kdf.Equal(oidPBKDF2) {
		return info, nil
	}
	var kdfParams, salt cryptobyte.String
	if !kdfAlg.ReadASN1(&kdfParams, cbasn1.SEQUENCE) || !kdfParams.ReadASN1(&salt, cbasn1.OCTET_STRING) || !kdfParams.ReadASN1Int64WithTag(&info.Iterations, cbasn1.INTEGER) {
		return info, bad
	}
	if kdfParams.PeekASN1Tag(cbasn1.INTEGER) {
		var keyLen int64
		if !kdfParams.ReadASN1Int64WithTag(&keyLen, cbasn1.INTEGER) {
			return info, bad
		}
	}
	info.PRF = "hmacWithSHA1" // the DEFAULT
	if kdfParams.PeekASN1Tag(cbasn1.SEQUENCE) {
		var prf cryptobyte.String
		var prfOID asn1.ObjectIdentifier
		if !kdfParams.ReadASN1(&prf, cbasn1.SEQUENCE) || !prf.ReadASN1ObjectIdentifier(&prfOID) {
			return info, bad
		}
		info.PRF = algorithmName(prfOID)
		info.PRFHasNULL = prf.PeekASN1Tag(cbasn1.NULL)
	}
	return info, nil
}

// encodeKeyPEM writes a private key as PEM: PKCS#8, encrypted when
// password is not empty.
func encodeKeyPEM(pkcs8DER, password []byte) ([]byte, error) {
	if len(password) == 0 {
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8DER}), nil
	}
	enc, err := encryptPKCS8(pkcs8DER, password)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: enc}), nil
}

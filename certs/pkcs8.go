package certs

import (
	"encoding/pem"

	"github.com/gmgate/gmgate/internal/keyenc"
)

// KeyFormat chooses how an encrypted private key names its PBKDF2 PRF,
// hmacWithSM3, and so which GM tool chain reads it: KeyFormatGmSSL
// (1.2.156.10197.1.401.2, GmSSL and gmsm; the default) or
// KeyFormatTongsuo (1.2.156.10197.1.401.3.1, Tongsuo). gmgate reads both.
type KeyFormat = keyenc.Format

const (
	KeyFormatGmSSL   = keyenc.FormatGmSSL
	KeyFormatTongsuo = keyenc.FormatTongsuo
	DefaultKeyFormat = keyenc.DefaultFormat
)

// ParseKeyFormat reads "gmssl" or "tongsuo"; "" is DefaultKeyFormat.
func ParseKeyFormat(s string) (KeyFormat, error) { return keyenc.ParseFormat(s) }

// KeyEncryption says how new private keys are written. With a Password
// they are encrypted PKCS#8: PBES2 with PBKDF2 (PRF hmacWithSM3 under the
// OID of Format) and SM4-CBC. A nil *KeyEncryption, or an empty Password,
// writes plain PKCS#8.
type KeyEncryption struct {
	Password []byte
	Format   KeyFormat
}

// keyEncryptionIterations is the PBKDF2 iteration count of keys written
// encrypted. A variable so that tests can make it cheap.
var keyEncryptionIterations = keyenc.DefaultIterations

// encodeKeyPEM writes a private key as PEM: PKCS#8, encrypted as enc says.
func encodeKeyPEM(pkcs8DER []byte, enc *KeyEncryption) ([]byte, error) {
	if enc == nil || len(enc.Password) == 0 {
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8DER}), nil
	}
	der, err := keyenc.Encrypt(pkcs8DER, enc.Password, enc.Format, keyEncryptionIterations)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), nil
}

package pki

import (
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// Key usages of the two TLCP certificates.
const (
	SignKeyUsage = certinfo.SignKeyUsage
	EncKeyUsage  = certinfo.EncKeyUsage
)

// KeyFormat chooses how an encrypted private key names its PBKDF2 PRF,
// hmacWithSM3, and so which GM tool chain reads it: KeyFormatGmSSL
// (1.2.156.10197.1.401.2, GmSSL and gmsm; the default) or
// KeyFormatTongsuo (1.2.156.10197.1.401.3.1, Tongsuo). gmgate reads both.
type KeyFormat = pemfile.KeyFormat

const (
	KeyFormatGmSSL   = pemfile.KeyFormatGmSSL
	KeyFormatTongsuo = pemfile.KeyFormatTongsuo
	DefaultKeyFormat = pemfile.DefaultKeyFormat
)

// ParseKeyFormat reads "gmssl" or "tongsuo"; "" is DefaultKeyFormat.
func ParseKeyFormat(s string) (KeyFormat, error) { return pemfile.ParseKeyFormat(s) }

// KeyEncryption says how new private keys are written. With a Password
// they are encrypted PKCS#8: PBES2 with PBKDF2 (PRF hmacWithSM3 under the
// OID of Format) and SM4-CBC. A nil *KeyEncryption, or an empty Password,
// writes plain PKCS#8.
type KeyEncryption = pemfile.KeyEncryption

// WriteCertificates writes certificates to path as PEM, atomically.
func WriteCertificates(path string, certs ...*smx509.Certificate) error {
	return pemfile.WriteCertificates(path, certs...)
}

// DescribePublicKey names a key's type and size ("SM2", "RSA-2048",
// "ECDSA P-256").
func DescribePublicKey(pub any) string { return certinfo.DescribePublicKey(pub) }

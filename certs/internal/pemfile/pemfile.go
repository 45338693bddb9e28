// Package pemfile reads and writes the PEM files of certificates and
// keys, for the runtime loader (package certs) and the offline tools
// (package certs/pki): bounded reads, block-by-block parsing that names
// a damaged block and its line, atomic writes, keys written 0600 and
// optionally encrypted. It must not open keys for use (that is accel)
// nor judge what a certificate is for.
package pemfile

import (
	"bytes"
	"crypto"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/keyenc"
)

// MaxFileSize bounds what is read as a certificate or key file.
const MaxFileSize = 4 << 20

func ReadSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is %d bytes, too large for a certificate file", path, st.Size())
	}
	return os.ReadFile(path)
}

// ReadCertificates reads the certificates of a PEM file (or of a single DER
// certificate), in file order. Errors name the file and say what to do.
func ReadCertificates(path string) ([]*smx509.Certificate, error) {
	data, err := ReadSmallFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs, nil
}

// ErrNotPEM says that a file holds neither PEM certificates nor a DER one.
var ErrNotPEM = errors.New("not a PEM certificate file")

func ParseCertificates(data []byte) ([]*smx509.Certificate, error) {
	var certs []*smx509.Certificate
	var other []string
	n := 1
	for i, b := range SplitPEM(data) {
		block := b.PEM
		if block == nil {
			return nil, errors.New(DamagedPEM(i+1, b))
		}
		if block.Type != "CERTIFICATE" && block.Type != "X509 CERTIFICATE" && block.Type != "TRUSTED CERTIFICATE" {
			other = append(other, block.Type)
			continue
		}
		c, err := smx509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d cannot be parsed: %v", n, err)
		}
		certs = append(certs, c)
		n++
	}
	if len(certs) > 0 {
		return certs, nil
	}
	if len(other) > 0 {
		kinds := strings.Join(other, ", ")
		if strings.Contains(kinds, "PRIVATE KEY") {
			return nil, fmt.Errorf("holds a %s, not a certificate; the certificate and key paths look swapped", kinds)
		}
		return nil, fmt.Errorf("holds %s but no CERTIFICATE block", kinds)
	}
	if c, err := smx509.ParseCertificate(bytes.TrimSpace(data)); err == nil {
		return []*smx509.Certificate{c}, nil
	}
	return nil, fmt.Errorf(`%w: no "-----BEGIN CERTIFICATE-----" block found; give the PEM certificate (convert DER with: openssl x509 -inform DER -in FILE -out FILE.pem)`, ErrNotPEM)
}

// Block is one block of a PEM file: the line of its "-----BEGIN", and
// the block, nil when it is damaged.
type Block struct {
	Line int
	PEM  *pem.Block
}

// SplitPEM returns the PEM blocks of data in file order. Unlike
// pem.Decode alone, which skips a "-----BEGIN" line that does not start a
// well-formed block (one cut short when it was copied, or with damaged
// base64) and reads on, it keeps such a block, as a nil one, so that a
// chain does not lose an intermediate without a word.
func SplitPEM(data []byte) []Block {
	var blocks []Block
	for start := pemBegin(data, 0); start >= 0; {
		next := pemBegin(data, start+1)
		end := len(data)
		if next >= 0 {
			end = next
		}
		block, _ := pem.Decode(data[start:end])
		blocks = append(blocks, Block{Line: bytes.Count(data[:start], []byte("\n")) + 1, PEM: block})
		start = next
	}
	return blocks
}

// DamagedPEM describes the n-th block of a file, which SplitPEM found
// damaged.
func DamagedPEM(n int, b Block) string {
	return fmt.Sprintf("PEM block %d (line %d) is damaged: it is cut short or is not valid base64; copy the whole block again, from its -----BEGIN line to its -----END line", n, b.Line)
}

// pemBegin returns the index of the first line at or after from that
// starts with "-----BEGIN ", or -1.
func pemBegin(data []byte, from int) int {
	const begin = "-----BEGIN "
	for i := from; i < len(data); {
		j := bytes.Index(data[i:], []byte(begin))
		if j < 0 {
			return -1
		}
		if i+j == 0 || data[i+j-1] == '\n' {
			return i + j
		}
		i += j + 1
	}
	return -1
}

// EncodeCertsPEM writes certificates as consecutive PEM blocks.
func EncodeCertsPEM(certs ...*smx509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

func WriteCertFile(path string, certs ...*smx509.Certificate) error {
	return WriteFileAtomic(path, EncodeCertsPEM(certs...), 0o644)
}

// WriteCertificates writes certificates to path as PEM (0644), replacing
// the file at once.
func WriteCertificates(path string, certs ...*smx509.Certificate) error {
	return WriteCertFile(path, certs...)
}

// marshalKeyPEM encodes a private key as PKCS#8 PEM, encrypted as enc
// says.
func marshalKeyPEM(key crypto.Signer, enc *KeyEncryption) ([]byte, error) {
	der, err := smx509.MarshalPKCS8PrivateKey(unwrapKey(key))
	if err != nil {
		return nil, err
	}
	return EncodeKeyPEM(der, enc)
}

// unwrapKey returns the in-memory key behind an accel software key, which
// is the only kind that can be written to a file.
func unwrapKey(key crypto.Signer) any {
	if h, ok := key.(interface{ SM2() *sm2.PrivateKey }); ok {
		return h.SM2()
	}
	return key
}

// WriteKeyFile writes a private key 0600.
func WriteKeyFile(path string, key crypto.Signer, enc *KeyEncryption) error {
	data, err := marshalKeyPEM(key, enc)
	if err != nil {
		return fmt.Errorf("key %s: %w", path, err)
	}
	return WriteFileAtomic(path, data, 0o600)
}

// WriteFileAtomic writes data to a temporary file in the same directory
// and renames it into place, so that a watcher never sees half a file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}

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

// KeyEncryptionIterations is the PBKDF2 iteration count of keys written
// encrypted. A variable so that tests can make it cheap.
var KeyEncryptionIterations = keyenc.DefaultIterations

// EncodeKeyPEM writes a private key as PEM: PKCS#8, encrypted as enc says.
func EncodeKeyPEM(pkcs8DER []byte, enc *KeyEncryption) ([]byte, error) {
	if enc == nil || len(enc.Password) == 0 {
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8DER}), nil
	}
	der, err := keyenc.Encrypt(pkcs8DER, enc.Password, enc.Format, KeyEncryptionIterations)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), nil
}

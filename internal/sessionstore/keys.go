package sessionstore

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

// KeySize is the size of a sealing key: 32 random bytes, written as 64
// hexadecimal digits (openssl rand -hex 32).
const KeySize = 32

// Sealed value layout (version 1):
//
//	version  1 byte   sealVersion
//	key ID   4 bytes  the first 4 bytes of SM3("gmgate sealing key id" || key)
//	salt    16 bytes  random, one per sealed value
//	box      n+16     SM4-GCM ciphertext of the value and its tag
//
// The SM4 key and the GCM nonce of each value are HKDF-SM3(key, salt,
// "gmgate seal v1"): 16 + 12 bytes. A key and a nonce are therefore never
// used twice, however many values one key seals, so no bound on the
// number of sealed values (as with random 96-bit GCM nonces) applies. The
// additional data is the header (version, key ID, salt) followed by what
// the caller binds the value to: the Redis key it is stored under, so that
// a value moved to another key does not open.
const (
	sealVersion = 1
	keyIDSize   = 4
	saltSize    = 16
	headerSize  = 1 + keyIDSize + saltSize
	// Overhead is what sealing adds to a value.
	Overhead = headerSize + 16
)

const (
	keyIDLabel  = "gmgate sealing key id"
	sealInfo    = "gmgate seal v1"
	ticketLabel = "gmgate tls session ticket key v1"
)

var errOpen = errors.New("sessionstore: sealed value does not open with any configured key")

type sealingKey struct {
	secret [KeySize]byte
	id     [keyIDSize]byte
}

// Keys are the sealing keys of values that leave the process: the first
// seals, any of them opens, so that a new key is rolled out first in
// second place, then moved first, and the old one removed once the values
// it sealed have expired.
type Keys struct {
	keys []sealingKey
}

// ParseKeys reads keys from text: 64 hexadecimal digits each, separated
// by white space, commas or new lines; lines starting with # are
// comments. source names where text came from in errors (which never
// repeat the text).
func ParseKeys(text, source string) (*Keys, error) {
	k := &Keys{}
	seen := map[[KeySize]byte]int{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			where := fmt.Sprintf("%s: key %d (line %d)", source, len(k.keys)+1, n+1)
			var sk sealingKey
			if len(field) != 2*KeySize {
				return nil, fmt.Errorf("%s is %d characters, not 64 hexadecimal digits; make a key with: openssl rand -hex 32", where, len(field))
			}
			if _, err := hex.Decode(sk.secret[:], []byte(field)); err != nil {
				return nil, fmt.Errorf("%s is not 64 hexadecimal digits; make a key with: openssl rand -hex 32", where)
			}
			if j, dup := seen[sk.secret]; dup {
				return nil, fmt.Errorf("%s repeats key %d; list each key once", where, j+1)
			}
			seen[sk.secret] = len(k.keys)
			h := sm3.New()
			h.Write([]byte(keyIDLabel))
			h.Write(sk.secret[:])
			copy(sk.id[:], h.Sum(nil))
			k.keys = append(k.keys, sk)
		}
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%s holds no key; write one key of 64 hexadecimal digits per line (openssl rand -hex 32)", source)
	}
	return k, nil
}

// LoadKeys reads the keys from a file or, when file is empty, from the
// environment variable env.
func LoadKeys(file, env string) (*Keys, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return ParseKeys(string(b), file)
	}
	v, ok := os.LookupEnv(env)
	if !ok {
		return nil, fmt.Errorf("environment variable %s is not set", env)
	}
	return ParseKeys(v, "environment variable "+env)
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.keys) }

// Equal reports whether k and o are the same keys in the same order.
func (k *Keys) Equal(o *Keys) bool {
	if k == nil || o == nil {
		return k == o
	}
	if len(k.keys) != len(o.keys) {
		return false
	}
	for i := range k.keys {
		if subtle.ConstantTimeCompare(k.keys[i].secret[:], o.keys[i].secret[:]) != 1 {
			return false
		}
	}
	return true
}

// aead returns the SM4-GCM of key for one salt, with its nonce.
func (sk *sealingKey) aead(salt []byte) (cipher.AEAD, []byte, error) {
	okm, err := hkdf.Key(sm3.New, sk.secret[:], salt, sealInfo, 16+12)
	if err != nil {
		return nil, nil, err
	}
	defer clear(okm)
	block, err := sm4.NewCipher(okm[:16])
	if err != nil {
		return nil, nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, err
	}
	return gcm, bytes.Clone(okm[16:]), nil
}

// Seal seals value with the first key, bound to ad: Open must be given
// the same ad.
func (k *Keys) Seal(value, ad []byte) ([]byte, error) {
	sk := &k.keys[0]
	out := make([]byte, headerSize, headerSize+len(value)+16)
	out[0] = sealVersion
	copy(out[1:], sk.id[:])
	if _, err := rand.Read(out[1+keyIDSize : headerSize]); err != nil {
		return nil, err
	}
	gcm, nonce, err := sk.aead(out[1+keyIDSize : headerSize])
	if err != nil {
		return nil, err
	}
	return gcm.Seal(out, nonce, value, additionalData(out[:headerSize], ad)), nil
}

// Open returns the value sealed in sealed with any of the keys, if it was
// sealed bound to ad and not changed since.
func (k *Keys) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != sealVersion {
		return nil, errOpen
	}
	header := sealed[:headerSize]
	aad := additionalData(header, ad)
	for i := range k.keys {
		sk := &k.keys[i]
		if !bytes.Equal(sk.id[:], header[1:1+keyIDSize]) {
			continue
		}
		gcm, nonce, err := sk.aead(header[1+keyIDSize:])
		if err != nil {
			return nil, err
		}
		if value, err := gcm.Open(nil, nonce, sealed[headerSize:], aad); err == nil {
			return value, nil
		}
	}
	return nil, errOpen
}

func additionalData(header, ad []byte) []byte {
	return append(append(make([]byte, 0, len(header)+len(ad)), header...), ad...)
}

// TicketKeys returns crypto/tls session ticket keys for tls.Config's
// SetSessionTicketKeys, one per sealing key in the same order (the first
// encrypts new tickets), derived for name: replicas with the same keys
// resume each other's tickets for the listener of that name, and no
// other listener's.
func (k *Keys) TicketKeys(name string) [][32]byte {
	out := make([][32]byte, len(k.keys))
	for i := range k.keys {
		key, err := hkdf.Key(sm3.New, k.keys[i].secret[:], nil, ticketLabel+"\x00"+name, 32)
		if err != nil {
			// Only a key length beyond HKDF's limit fails.
			panic(err)
		}
		copy(out[i][:], key)
		clear(key)
	}
	return out
}

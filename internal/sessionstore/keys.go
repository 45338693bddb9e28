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
	// Switches gmsm's single-block SM4 (CMAC, CBC encryption, GCM's
	// tag mask) to its AES-instruction code where the CPU has it.
	_ "github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/tlcp"
)

// KeySize is the size of a sealing key: 32 random bytes, written as 64
// hexadecimal digits (openssl rand -hex 32).
const KeySize = 32

// Sealed value layout (version 2):
//
//	version  1 byte   sealVersion
//	key ID   4 bytes  the first 4 bytes of SM3("gmgate sealing key id" || key)
//	salt    24 bytes  random, one per sealed value
//	box      n+16     SM4-GCM ciphertext of the value and its tag
//
// Each value has an SM4 key of its own, derived from the sealing key and
// the first 12 bytes of its salt, and its GCM nonce is the last 12 bytes:
// a key and a nonce are used together again only if 192 random bits
// repeat, so no bound on the number of values one key seals (as with
// random 96-bit GCM nonces under one key) applies. The value's key is
// CMAC-SM4, under a key derived once from the sealing key (HKDF-SM3 with
// sealInfo), of the block 00 01 'X' 00 || salt[:12]: the counter-mode KDF
// of NIST SP 800-108r1 with CMAC, one block, the derivation C2SP's
// XAES-256-GCM makes with AES. It costs one SM4 block per value where
// HKDF-SM3 cost eight SM3 compressions and as many allocations. The
// additional data is the header (version, key ID, salt) followed by what
// the caller binds the value to: the Redis key it is stored under, so that
// a value moved to another key does not open.
const (
	sealVersion = 2
	keyIDSize   = 4
	saltSize    = 24
	headerSize  = 1 + keyIDSize + saltSize
	// Overhead is what sealing adds to a value.
	Overhead = headerSize + 16
)

const (
	keyIDLabel  = "gmgate sealing key id"
	sealInfo    = "gmgate seal v2"
	ticketLabel = "gmgate tls session ticket key v1"
)

var errOpen = errors.New("sessionstore: sealed value does not open with any configured key")

type sealingKey struct {
	secret [KeySize]byte
	id     [keyIDSize]byte
	// derive is SM4 under the key that derives each value's key, and k1
	// its CMAC subkey.
	derive cipher.Block
	k1     [sm4.BlockSize]byte
}

// newSealingKey prepares secret for sealing.
func newSealingKey(secret [KeySize]byte) (sealingKey, error) {
	sk := sealingKey{secret: secret}
	h := sm3.New()
	h.Write([]byte(keyIDLabel))
	h.Write(secret[:])
	copy(sk.id[:], h.Sum(nil))
	dk, err := hkdf.Key(sm3.New, secret[:], nil, sealInfo, sm4.BlockSize)
	if err != nil {
		return sk, err
	}
	defer clear(dk)
	if sk.derive, err = sm4.NewCipher(dk); err != nil {
		return sk, err
	}
	// K1 = L·x in GF(2^128), L = SM4(0^128) (NIST SP 800-38B).
	var l [sm4.BlockSize]byte
	sk.derive.Encrypt(l[:], l[:])
	var carry byte
	for i := len(l) - 1; i >= 0; i-- {
		sk.k1[i] = l[i]<<1 | carry
		carry = l[i] >> 7
	}
	if carry != 0 {
		sk.k1[len(sk.k1)-1] ^= 0x87
	}
	clear(l[:])
	return sk, nil
}

// aead returns the SM4-GCM of the value whose salt is salt, and its nonce.
func (sk *sealingKey) aead(salt []byte) (cipher.AEAD, []byte, error) {
	var key [sm4.BlockSize]byte
	key[1], key[2] = 0x01, 'X'
	copy(key[4:], salt[:12])
	subtle.XORBytes(key[:], key[:], sk.k1[:])
	sk.derive.Encrypt(key[:], key[:])
	gcm, err := tlcp.NewSM4GCM(key[:])
	clear(key[:])
	if err != nil {
		return nil, nil, err
	}
	return gcm, salt[12:], nil
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
			var secret [KeySize]byte
			if len(field) != 2*KeySize {
				return nil, fmt.Errorf("%s is %d characters, not 64 hexadecimal digits; make a key with: openssl rand -hex 32", where, len(field))
			}
			if _, err := hex.Decode(secret[:], []byte(field)); err != nil {
				return nil, fmt.Errorf("%s is not 64 hexadecimal digits; make a key with: openssl rand -hex 32", where)
			}
			if j, dup := seen[secret]; dup {
				return nil, fmt.Errorf("%s repeats key %d; list each key once", where, j+1)
			}
			seen[secret] = len(k.keys)
			sk, err := newSealingKey(secret)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			for j := range k.keys {
				// Values name the key that sealed them by its ID.
				if k.keys[j].id == sk.id {
					return nil, fmt.Errorf("%s has the key ID of key %d (a one in four billion chance); make another key with: openssl rand -hex 32", where, j+1)
				}
			}
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

// Seal seals value with the first key, bound to ad: Open must be given
// the same ad.
func (k *Keys) Seal(value, ad []byte) ([]byte, error) {
	return k.seal(value, string(ad))
}

func (k *Keys) seal(value []byte, ad string) ([]byte, error) {
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

// SealedWithFirst reports whether sealed is in the current format and
// names the first key: what Seal would seal it with now.
func (k *Keys) SealedWithFirst(sealed []byte) bool {
	return len(sealed) >= headerSize && sealed[0] == sealVersion && bytes.Equal(sealed[1:1+keyIDSize], k.keys[0].id[:])
}

// Open returns the value sealed in sealed with any of the keys, if it was
// sealed bound to ad and not changed since.
func (k *Keys) Open(sealed, ad []byte) ([]byte, error) {
	return k.open(sealed, string(ad))
}

// open is Open with ad as a string. Key IDs are distinct (see ParseKeys),
// so one key at most is tried. The value is decrypted into a buffer of its
// own: sealed may be memory its provider does not let us write (go-redis
// hands out a string's bytes).
func (k *Keys) open(sealed []byte, ad string) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != sealVersion {
		return nil, errOpen
	}
	header := sealed[:headerSize]
	for i := range k.keys {
		sk := &k.keys[i]
		if !bytes.Equal(sk.id[:], header[1:1+keyIDSize]) {
			continue
		}
		gcm, nonce, err := sk.aead(header[1+keyIDSize:])
		if err != nil {
			return nil, err
		}
		value, err := gcm.Open(nil, nonce, sealed[headerSize:], additionalData(header, ad))
		if err != nil {
			return nil, errOpen
		}
		return value, nil
	}
	return nil, errOpen
}

func additionalData(header []byte, ad string) []byte {
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

package accel

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel/internal/secret"
	"github.com/gmgate/gmgate/internal/keyenc"
)

func init() { Register("file", softwareBackend{}) }

// softwareBackend holds keys in process memory, read from PEM files.
type softwareBackend struct{}

// ErrKeyPassword is returned (wrapped) when an encrypted key cannot be
// decrypted with the password given.
var ErrKeyPassword = errors.New("wrong password for encrypted private key")

// ErrKeyEncrypted is returned (wrapped) when an encrypted key is opened
// without a password.
var ErrKeyEncrypted = errors.New("the key is encrypted")

// ErrKeyEncryption is returned (wrapped) when an encrypted key uses an
// algorithm gmgate does not implement; the message names it.
var ErrKeyEncryption = errors.New("unsupported key encryption")

// Check refuses the parameters Open refuses, reading nothing.
func (softwareBackend) Check(ref *Ref) error {
	for name, values := range ref.Params {
		// "password" itself is refused by secret.Check, with its own fix.
		if name == "password" || name == "password-env" || name == "password-file" {
			continue
		}
		// A word with no value may be a password written as the whole
		// query: it is not repeated.
		if slices.Contains(values, "") {
			return fmt.Errorf("key %s: the key reference has a parameter without a value; a file: key takes password-env=VAR or password-file=PATH", secret.Redact(ref.Path))
		}
		return fmt.Errorf("key %s: unknown parameter %q in the key reference; a file: key takes password-env or password-file", secret.Redact(ref.Path), name)
	}
	if err := secret.Check(ref.Params, "password"); err != nil {
		return fmt.Errorf("key %s: %w", secret.Redact(ref.Path), err)
	}
	return nil
}

func (b softwareBackend) Open(_ context.Context, ref *Ref) (Key, error) {
	if err := b.Check(ref); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(ref.Path)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", secret.Redact(ref.Path), err)
	}
	password, err := secret.Read(ref.Params, "password")
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", secret.Redact(ref.Path), err)
	}
	key, err := ParsePEMPrivateKey(data, password)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", secret.Redact(ref.Path), err)
	}
	return NewSoftwareKey(key), nil
}

// ParsePEMPrivateKey parses the first private key in PEM data: PKCS#8
// (plain or, with password, encrypted PBES2), SEC 1 EC (SM2 or NIST) or
// PKCS#1 RSA.
func ParsePEMPrivateKey(data, password []byte) (crypto.Signer, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case "ENCRYPTED PRIVATE KEY":
			if password == nil {
				return nil, fmt.Errorf("%w; give its password with password-env=VAR or password-file=PATH", ErrKeyEncrypted)
			}
			plain, err := keyenc.Decrypt(block.Bytes, password)
			var unsupported *keyenc.UnsupportedError
			switch {
			case errors.As(err, &unsupported):
				return nil, fmt.Errorf("%w: %v; gmgate reads %s: decrypt the key with the tool that wrote it and encrypt it again with one of these (gmgate writes PBES2/PBKDF2-hmacWithSM3/SM4-CBC)", ErrKeyEncryption, err, keyenc.Supported)
			case errors.Is(err, keyenc.ErrWrongPassword):
				return nil, ErrKeyPassword
			case err != nil:
				return nil, fmt.Errorf("encrypted key: %w", err)
			}
			k, err := smx509.ParsePKCS8PrivateKey(plain)
			if err != nil {
				return nil, fmt.Errorf("parsing the decrypted PKCS#8 key: %w", err)
			}
			return asSigner(k)
		case "PRIVATE KEY":
			k, err := smx509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing PKCS#8 key: %w", err)
			}
			return asSigner(k)
		case "EC PRIVATE KEY", "SM2 PRIVATE KEY":
			if k, err := smx509.ParseSM2PrivateKey(block.Bytes); err == nil {
				return k, nil
			}
			k, err := smx509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing EC key: %w", err)
			}
			return asSigner(k)
		case "RSA PRIVATE KEY":
			k, err := smx509.ParsePKCS1PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing RSA key: %w", err)
			}
			return k, nil
		}
	}
	return nil, errors.New("no private key found (expected a PEM block such as PRIVATE KEY, ENCRYPTED PRIVATE KEY or EC PRIVATE KEY)")
}

func asSigner(k any) (crypto.Signer, error) {
	switch k := k.(type) {
	case *sm2.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		if sm2.IsSM2PublicKey(&k.PublicKey) {
			return new(sm2.PrivateKey).FromECPrivateKey(k)
		}
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("unsupported private key type %T", k)
}

// NewSoftwareKey wraps an in-memory key so that its operations are
// observed. SM2 keys keep SM2 key agreement (ECDH) for the ECDHE suites.
//
// Only keys that can decrypt offer Decrypt: crypto/tls refuses a
// crypto.Decrypter whose public key is not RSA, so an ECDSA key must not
// look like one.
func NewSoftwareKey(k crypto.Signer) Key {
	if s, ok := k.(*sm2.PrivateKey); ok {
		key := &softwareSM2Key{k: s}
		if za, err := sm2.CalculateZA(&s.PublicKey, nil); err == nil {
			key.za = za
		}
		if s.D != nil && s.D.BitLen() <= 256 {
			d := s.D.FillBytes(make([]byte, 32))
			key.signer, _ = newSM2Signer(d) // gmsm signs for a key it refuses
			clear(d)
		}
		return key
	}
	if d, ok := k.(crypto.Decrypter); ok {
		if _, isRSA := k.Public().(*rsa.PublicKey); isRSA {
			return &softwareDecryptingKey{softwareKey{k: k}, d}
		}
	}
	return &softwareKey{k: k}
}

const softwareName = "software"

type softwareKey struct{ k crypto.Signer }

func (s *softwareKey) Public() crypto.PublicKey { return s.k.Public() }
func (s *softwareKey) Backend() string          { return softwareName }
func (s *softwareKey) Close() error             { return nil }

func (s *softwareKey) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	sig, err := s.k.Sign(rand, digest, opts)
	ObserveOp(softwareName, "sign", start, err)
	return sig, err
}

// softwareDecryptingKey is an in-memory key that can also decrypt (RSA).
type softwareDecryptingKey struct {
	softwareKey
	d crypto.Decrypter
}

func (s *softwareDecryptingKey) Decrypt(rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	start := time.Now()
	pt, err := s.d.Decrypt(rand, msg, opts)
	ObserveOp(softwareName, "decrypt", start, err)
	return pt, err
}

// softwareSM2Key is an SM2 key in memory.
type softwareSM2Key struct {
	k *sm2.PrivateKey
	// za is Z, the hash of the default user ID, the curve and the public
	// key that every signature with sm2.DefaultSM2SignerOpts (TLCP's)
	// hashes in front of its message; computed once instead of per
	// signature.
	za []byte
	// signer signs those digests with the key's constants precomputed
	// (see sm2sign.go); nil leaves every signature to gmsm.
	signer *sm2Signer
}

func (s *softwareSM2Key) Public() crypto.PublicKey { return s.k.Public() }
func (s *softwareSM2Key) Backend() string          { return softwareName }
func (s *softwareSM2Key) Close() error             { return nil }

func (s *softwareSM2Key) Sign(rand io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	if o, ok := opts.(*sm2.SM2SignerOption); ok && o == sm2.DefaultSM2SignerOpts && s.za != nil {
		if s.signer != nil && rand != nil {
			sig, err := s.signer.signMessage(rand, s.za, msg)
			ObserveOp(softwareName, "sign", start, err)
			return sig, err
		}
		// e = SM3(Z || msg), then sign e as a digest.
		h := sm3.New()
		h.Write(s.za)
		h.Write(msg)
		var e [sm3.Size]byte
		msg, opts = h.Sum(e[:0]), nil
	}
	sig, err := s.k.Sign(rand, msg, opts)
	ObserveOp(softwareName, "sign", start, err)
	return sig, err
}

func (s *softwareSM2Key) Decrypt(rand io.Reader, ct []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	start := time.Now()
	if opts == nil {
		// gmsm reads an ASN.1 ciphertext's point through big.Int; the
		// plain form (its default, C1C3C2) it takes as bytes.
		if plain, ok := sm2PlainCiphertext(ct); ok {
			ct = plain
		}
	}
	pt, err := s.k.Decrypt(rand, ct, opts)
	ObserveOp(softwareName, "decrypt", start, err)
	return pt, err
}

// ECDH exposes the key for SM2 key agreement (ECDHE suites).
func (s *softwareSM2Key) ECDH() (*ecdh.PrivateKey, error) { return s.k.ECDH() }

// SM2 returns the underlying key; for generating and migrating
// certificates.
func (s *softwareSM2Key) SM2() *sm2.PrivateKey { return s.k }

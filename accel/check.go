package accel

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel/internal/secret"
	"github.com/gmgate/gmgate/accel/sdf"
)

// Use says what a certificate's key is for in TLCP.
type Use int

const (
	// UseSign is the signing key (ServerKeyExchange, CertificateVerify).
	UseSign Use = iota + 1
	// UseEnc is the encryption key (the ECC suites' ClientKeyExchange).
	UseEnc
)

func (u Use) String() string {
	if u == UseEnc {
		return "encryption"
	}
	return "signing"
}

// SelfTest checks, before a key serves, that it belongs to the
// certificate and works: its public key must equal the certificate's, a
// signing key's test signature must verify with gmsm against the
// certificate, and an encryption key must decrypt what gmsm encrypted to
// the certificate. The error says which check failed and what to look at.
func SelfTest(ctx context.Context, key Key, cert *smx509.Certificate, use Use) error {
	name := use.String()
	certPub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !sm2.IsSM2PublicKey(certPub) {
		return fmt.Errorf("the %s certificate (%s) does not hold an SM2 public key", name, describe(cert))
	}
	keyPub, ok := key.Public().(*ecdsa.PublicKey)
	if !ok || !keyPub.Equal(certPub) {
		return fmt.Errorf("the %s key (%s backend) does not match the %s certificate (%s): its public key differs; check that the key reference names the key this certificate was issued for (for sdf: the index= and key=sign|enc)", name, key.Backend(), name, describe(cert))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch use {
	case UseSign:
		msg := make([]byte, 64)
		if _, err := rand.Read(msg); err != nil {
			return err
		}
		sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
		if err != nil {
			return fmt.Errorf("test signature with the %s key (%s backend) failed: %w", name, key.Backend(), err)
		}
		if !sm2.VerifyASN1WithSM2(certPub, nil, msg, sig) {
			return fmt.Errorf("test signature with the %s key (%s backend) does not verify against the %s certificate (%s)", name, key.Backend(), name, describe(cert))
		}
	case UseEnc:
		dec, ok := key.(crypto.Decrypter)
		if !ok {
			return fmt.Errorf("the %s key (%s backend) cannot decrypt", name, key.Backend())
		}
		msg := make([]byte, 48)
		if _, err := rand.Read(msg); err != nil {
			return err
		}
		ct, err := sm2.EncryptASN1(rand.Reader, certPub, msg)
		if err != nil {
			return err
		}
		pt, err := dec.Decrypt(rand.Reader, ct, nil)
		if err != nil {
			return fmt.Errorf("test decryption with the %s key (%s backend) of a message encrypted to the %s certificate (%s) failed: %w", name, key.Backend(), name, describe(cert), err)
		}
		if !bytes.Equal(pt, msg) {
			return fmt.Errorf("test decryption with the %s key (%s backend) returned other bytes than were encrypted to the %s certificate (%s)", name, key.Backend(), name, describe(cert))
		}
	default:
		return fmt.Errorf("SelfTest: unknown use %d", use)
	}
	return nil
}

func describe(c *smx509.Certificate) string {
	return fmt.Sprintf("subject %q, serial %X", c.Subject.String(), c.SerialNumber)
}

// SupportsKeyAgreement reports whether an encryption key can take part in
// SM2 key agreement, which the ECDHE_SM4_* suites need: software SM2 keys
// can; keys held by SDF devices cannot.
func SupportsKeyAgreement(key crypto.PrivateKey) bool {
	_, ok := key.(interface {
		ECDH() (*ecdh.PrivateKey, error)
	})
	return ok
}

// ErrNoKeyAgreement is returned (wrapped) by RequireKeyAgreement.
var ErrNoKeyAgreement = errors.New("the encryption key cannot do SM2 key agreement")

// RequireKeyAgreement returns an error that says what to change when an
// ECDHE suite is configured with an encryption key that cannot do SM2 key
// agreement; ref names the key in the message.
func RequireKeyAgreement(ref string, key crypto.PrivateKey) error {
	if SupportsKeyAgreement(key) {
		return nil
	}
	backend := "this"
	if k, ok := key.(Key); ok {
		backend = "the " + k.Backend()
	}
	return fmt.Errorf("%w: the ECDHE_SM4_* suites need SM2 key agreement with the encryption key %s, which %s backend does not offer (key agreement stays in software); remove the ECDHE suites from this listener or use a file: encryption key (a card-held signing key works with every suite)", ErrNoKeyAgreement, secret.Redact(ref), backend)
}

// Result labels an operation's outcome for metrics with one of a few
// values: "ok", "timeout", "pool_exhausted", "device_error", "closed" or
// "error".
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sdf.ErrTimeout):
		return "timeout"
	case errors.Is(err, sdf.ErrPoolExhausted):
		return "pool_exhausted"
	case errors.Is(err, sdf.ErrClosed):
		return "closed"
	case sdf.DeviceError(err):
		return "device_error"
	}
	return "error"
}

package sdf

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/gmgate/gmgate/accel/internal/observe"

	"github.com/emmansun/gmsm/sm2"
)

// Key is a private key held by an SDF device. It implements
// crypto.Signer (signing keys) and crypto.Decrypter (encryption keys);
// the other operation fails. It does not implement SM2 key agreement.
type Key struct {
	d   *device
	cfg Config // without the PIN, which only the device keeps
	// hasPIN says whether a PIN was given.
	hasPIN    bool
	pub       *ecdsa.PublicKey
	closeOnce sync.Once
}

// Open opens the key cfg names: it loads the library and opens the device
// (once per library in the process), exports the public key and tests the
// key: a signing key signs a random message that must verify with gmsm
// against the exported public key, and an encryption key decrypts a
// message gmsm encrypted to it. obs may be nil.
func Open(ctx context.Context, cfg Config, obs Observer) (*Key, error) {
	if obs == nil {
		obs = observe.Nop{}
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = DefaultSessions
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Profile.CoordLen == 0 {
		cfg.Profile = Profiles[DefaultProfile]
	}
	if cfg.Index == 0 || (cfg.Usage != UsageSign && cfg.Usage != UsageEnc) {
		return nil, errors.New("sdf: Config needs an Index from 1 and a Usage")
	}
	if cfg.PIN != nil && cfg.PINSource == "" {
		cfg.PINSource = "the configuration"
	}
	d, err := acquire(ctx, cfg, obs)
	if err != nil {
		return nil, err
	}
	k := &Key{d: d, cfg: cfg, hasPIN: cfg.PIN != nil}
	k.cfg.PIN = nil
	if err := k.start(ctx); err != nil {
		k.Close()
		return nil, fmt.Errorf("%v: %w", k, err)
	}
	return k, nil
}

// String names the key for messages: "SDF key index 1 (sign) on /path".
func (k *Key) String() string {
	return fmt.Sprintf("SDF key index %d (%s) on %s", k.cfg.Index, k.cfg.Usage, k.cfg.Library)
}

// Public returns the SM2 public key the device exported.
func (k *Key) Public() crypto.PublicKey { return k.pub }

// Backend returns "sdf".
func (k *Key) Backend() string { return backendName }

// Usage says whether this is the signing or the encryption key.
func (k *Key) Usage() Usage { return k.cfg.Usage }

// Close releases the key. The device and its sessions are closed with the
// last key open on them, once the calls in progress return: Close waits
// for that up to the key's timeout and then returns an error saying the
// device closes in the background, since a call on it has not returned
// (a hung card or link). Until it is closed, opening a key on the same
// library waits for it, within that key's timeout.
func (k *Key) Close() error {
	var err error
	k.closeOnce.Do(func() { err = k.d.release(k.cfg.Index, k.cfg.Timeout) })
	return err
}

func (k *Key) start(ctx context.Context) error {
	if k.cfg.Usage == UsageEnc {
		if k.cfg.Profile.Decrypt == DecryptNone {
			return errors.New("key=enc needs SDF_InternalDecrypt_ECC, but the reference says decrypt=none; give the prototype variant (decrypt=v1 ... v4) from the vendor's header")
		}
		if !k.d.lib.has(fnInternalDecrypt) {
			return fmt.Errorf("the library has no SDF_InternalDecrypt_ECC, the vendor extension that decrypting a TLCP pre-master secret with a card-held key needs; keep the encryption key in a file: key, or ask the vendor for a library with the extension")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	buf := make([]byte, pubBufLen)
	err := k.d.do(ctx, k.cfg.Index, func(l library, s uintptr) error {
		return l.exportPublicKey(s, k.cfg.Usage, k.cfg.Index, buf)
	})
	var ae *accessError
	if errors.As(err, &ae) {
		return err
	}
	if err != nil {
		return fmt.Errorf("exporting the public key: %w", k.explain(err))
	}
	if k.pub, err = k.cfg.Profile.decodePublicKey(buf); err != nil {
		return fmt.Errorf("the public key the device exported is not valid (%v); the coordinate width of %v probably does not fit this library (try coord=32 or profile=sansec2008)", err, k.cfg.Profile)
	}
	test := k.testDecrypt
	if k.cfg.Usage == UsageSign {
		test = k.testSign
	}
	if err := test(ctx); err != nil {
		return err
	}
	k.d.setPublic(k.cfg.Index, k.cfg.Usage, k.pub)
	return nil
}

// testSign checks that a signature made on the device verifies with gmsm.
func (k *Key) testSign(ctx context.Context) error {
	msg := make([]byte, 64)
	if _, err := rand.Read(msg); err != nil {
		return err
	}
	sig, err := k.sign(ctx, msg, sm2.DefaultSM2SignerOpts)
	if err != nil {
		return fmt.Errorf("self-test signature: %w", err)
	}
	if !sm2.VerifyASN1WithSM2(k.pub, nil, msg, sig) {
		return fmt.Errorf("self-test signature made by SDF_InternalSign_ECC does not verify against the exported public key; the signature layout of %v probably does not fit this library", k.cfg.Profile)
	}
	return nil
}

// testDecrypt checks that a 48-byte message gmsm encrypted to the exported
// public key decrypts on the device.
func (k *Key) testDecrypt(ctx context.Context) error {
	msg := make([]byte, 48)
	if _, err := rand.Read(msg); err != nil {
		return err
	}
	ct, err := sm2.EncryptASN1(rand.Reader, k.pub, msg)
	if err != nil {
		return err
	}
	pt, err := k.decrypt(ctx, ct)
	if err != nil {
		return fmt.Errorf("self-test decryption: %w", err)
	}
	if !bytes.Equal(pt, msg) {
		return fmt.Errorf("self-test decryption through SDF_InternalDecrypt_ECC returned other bytes than were encrypted; the ECCCipher layout or coordinate width of %v probably does not fit this library", k.cfg.Profile)
	}
	return nil
}

// explain adds what to do about an error from the device.
func (k *Key) explain(err error) error {
	var se *Error
	if !errors.As(err, &se) {
		return err
	}
	var ae *accessError
	switch {
	case errors.As(err, &ae):
		return err
	case se.Code == sdrKeyNotExist:
		return fmt.Errorf("%w; there is no %s key at index %d: check index=", err, k.cfg.Usage, k.cfg.Index)
	case se.unauthorised() && !k.hasPIN:
		return fmt.Errorf("%w; the device wants a PIN for this key: add pin-env=VAR or pin-file=PATH", err)
	case se.profileMismatch():
		return fmt.Errorf("%w; this usually means %v does not fit the library: check the vendor's header for the algorithm IDs and the SDF_InternalDecrypt_ECC prototype", err, k.cfg.Profile)
	}
	return err
}

// Sign signs msg on the device. With sm2.SM2SignerOption (as TLCP passes
// sm2.DefaultSM2SignerOpts) msg is the whole message and the digest e =
// SM3(Z || msg) is computed here with the option's user ID and the
// signing public key; with other options whose HashFunc is zero, a 32-byte
// msg is taken as e itself. The device's own random nonce is used, so rand
// is ignored. The signature is DER.
func (k *Key) Sign(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.observe("sign", func(ctx context.Context) ([]byte, error) { return k.sign(ctx, msg, opts) })
}

// observe runs one operation within the key's timeout and reports it.
func (k *Key) observe(op string, f func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	out, err := f(ctx)
	cancel()
	k.d.obs.Op(backendName, op, err, time.Since(start))
	return out, err
}

func (k *Key) sign(ctx context.Context, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if k.cfg.Usage != UsageSign {
		return nil, fmt.Errorf("%v is an encryption key and cannot sign; use key=sign", k)
	}
	e, err := k.digest(msg, opts)
	if err != nil {
		return nil, err
	}
	out := make([]byte, sigBufLen)
	index := k.cfg.Index
	err = k.d.do(ctx, index, func(l library, s uintptr) error { return l.internalSign(s, index, e, out) })
	if err != nil {
		return nil, k.explain(err)
	}
	sig, err := k.cfg.Profile.signatureDER(out)
	if err != nil {
		return nil, fmt.Errorf("the device returned an invalid signature (%v); check coord= for %v", err, k.cfg.Profile)
	}
	return sig, nil
}

// digest returns the 32-byte value the device signs.
func (k *Key) digest(msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if o, ok := opts.(*sm2.SM2SignerOption); ok && o != nil {
		raw, uid := signerOption(o)
		if raw {
			return sm2.CalculateSM2Hash(k.pub, msg, uid)
		}
	} else if opts != nil && opts.HashFunc() != 0 {
		return nil, fmt.Errorf("SM2 keys sign with sm2.DefaultSM2SignerOpts, not with %v", opts.HashFunc())
	}
	if len(msg) != 32 {
		return nil, fmt.Errorf("a pre-computed SM2 digest must be 32 bytes, not %d (pass sm2.DefaultSM2SignerOpts to sign a whole message)", len(msg))
	}
	return msg, nil
}

// signerOption reads gmsm's SM2SignerOption, whose fields are not
// exported: whether msg is the raw message, and the user ID. An option
// whose fields cannot be read counts as the default (raw message, default
// ID), which is what TLCP passes.
func signerOption(o *sm2.SM2SignerOption) (raw bool, uid []byte) {
	v := reflect.ValueOf(o).Elem()
	force, id := v.FieldByName("forceGMSign"), v.FieldByName("uid")
	if force.Kind() != reflect.Bool || id.Kind() != reflect.Slice || id.Type().Elem().Kind() != reflect.Uint8 {
		return true, nil
	}
	return force.Bool(), id.Bytes()
}

// Decrypt decrypts an SM2 ciphertext on the device: GM/T 0009 DER (as
// TLCP's ClientKeyExchange carries it) or, with nil opts, the raw form
// 04||x||y||C3||C2. Any failure that may depend on the ciphertext is
// reported as ErrDecryption; failures of the device (timeouts, a busy
// pool, a dead link) are reported as they are.
func (k *Key) Decrypt(_ io.Reader, ct []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	return k.observe("decrypt", func(ctx context.Context) ([]byte, error) { return k.decryptOpts(ctx, ct, opts) })
}

func (k *Key) decryptOpts(ctx context.Context, ct []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	if k.cfg.Usage != UsageEnc {
		return nil, fmt.Errorf("%v is a signing key and cannot decrypt; use key=enc", k)
	}
	if opts != nil && len(ct) > 0 && ct[0] != 0x30 {
		return nil, ErrDecryption
	}
	pt, err := k.decrypt(ctx, ct)
	if err == nil {
		return pt, nil
	}
	var se *Error
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrPoolExhausted) || errors.Is(err, ErrClosed) ||
		(errors.As(err, &se) && se.sessionFatal()) {
		return nil, err
	}
	var ae *accessError
	var kc *keyChangedError
	if errors.As(err, &ae) || errors.As(err, &kc) {
		return nil, err
	}
	return nil, ErrDecryption
}

func (k *Key) decrypt(ctx context.Context, ct []byte) ([]byte, error) {
	c, err := parseCiphertext(ct)
	if err != nil {
		return nil, err
	}
	p := k.cfg.Profile
	cipher := p.encodeCipher(c)
	out := make([]byte, 256)
	index := k.cfg.Index
	var n int
	err = k.d.do(ctx, index, func(l library, s uintptr) error {
		var err error
		n, err = l.internalDecrypt(s, p.Decrypt, p.AlgIDs.SM2Encrypt, index, cipher, out)
		return err
	})
	if err != nil {
		return nil, k.explain(err)
	}
	if n != len(c.c2) {
		return nil, fmt.Errorf("SDF_InternalDecrypt_ECC returned %d bytes for a %d-byte ciphertext", n, len(c.c2))
	}
	return append([]byte(nil), out[:n]...), nil
}

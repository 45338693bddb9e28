package accel

import (
	"context"
	"crypto"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
)

// TestSoftwareSM2SignOptions checks the signatures of a software SM2 key
// against gmsm's verification for each way of asking: the default user ID
// (TLCP's, served from the precomputed Z), another user ID, and a digest
// the caller hashed itself.
func TestSoftwareSM2SignOptions(t *testing.T) {
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := NewSoftwareKey(priv)
	pub := &priv.PublicKey
	msg := []byte("client_random || server_random || encryption certificate")

	sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !sm2.VerifyASN1WithSM2(pub, nil, msg, sig) {
		t.Error("signature with the default user ID does not verify")
	}
	if sm2.VerifyASN1WithSM2(pub, nil, append([]byte("x"), msg...), sig) {
		t.Error("signature verifies over another message")
	}
	if sm2.VerifyASN1WithSM2(pub, []byte("another-user-id"), msg, sig) {
		t.Error("signature with the default user ID verifies with another")
	}

	uid := []byte("another-user-id")
	sig, err = key.Sign(rand.Reader, msg, sm2.NewSM2SignerOption(true, uid))
	if err != nil {
		t.Fatal(err)
	}
	if !sm2.VerifyASN1WithSM2(pub, uid, msg, sig) {
		t.Error("signature with another user ID does not verify")
	}

	e := sm3.Sum(msg)
	sig, err = key.Sign(rand.Reader, e[:], crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	if !sm2.VerifyASN1(pub, e[:], sig) {
		t.Error("signature of a digest does not verify")
	}
}

func BenchmarkSoftwareSM2Sign(b *testing.B) {
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64+3+500)
	b.Run("key=gmsm", func(b *testing.B) {
		for b.Loop() {
			if _, err := priv.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts); err != nil {
				b.Fatal(err)
			}
		}
	})
	key := NewSoftwareKey(priv)
	b.Run("key=accel", func(b *testing.B) {
		for b.Loop() {
			if _, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A file: reference takes password-env and password-file only: a
// misspelt parameter is an error that names it, not a password silently
// not given (which an unencrypted key would never show, and an encrypted
// one would report as no password at all).
func TestSoftwareUnknownParameter(t *testing.T) {
	dir := t.TempDir()
	plain, encrypted := filepath.Join(dir, "plain.key"), filepath.Join(dir, "enc.key")
	writeSM2Key(t, plain, nil)
	writeSM2Key(t, encrypted, []byte("pw"))
	t.Setenv("GMGATE_TEST_KEYPW", "pw")
	for _, ref := range []string{
		"file:" + plain + "?password_env=GMGATE_TEST_KEYPW",
		"file:" + encrypted + "?password_env=GMGATE_TEST_KEYPW",
		"file:" + encrypted + "?pasword-file=/run/secrets/pw",
	} {
		_, err := Open(context.Background(), ref)
		if err == nil || !strings.Contains(err.Error(), "unknown parameter") || !strings.Contains(err.Error(), "password-env or password-file") {
			t.Errorf("%s: %v", ref, err)
		}
	}
	// A password written as the whole query is not repeated.
	_, err := Open(context.Background(), "file:"+encrypted+"?Hunter2Secret")
	if err == nil || strings.Contains(err.Error(), "Hunter2Secret") || !strings.Contains(err.Error(), "password-env=VAR or password-file=PATH") {
		t.Errorf("bare word: %v", err)
	}
	if _, err := Open(context.Background(), "file:"+encrypted+"?password-env=GMGATE_TEST_KEYPW"); err != nil {
		t.Errorf("known parameter: %v", err)
	}
}

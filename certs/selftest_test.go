package certs

import (
	"context"
	"crypto"
	"errors"
	"io"
	"testing"

	"github.com/gmgate/gmgate/accel"
)

// brokenCardBackend opens file keys as a crypto card would hold them, but
// the card signs nothing: its keys report the right public key and fail
// every operation.
type brokenCardBackend struct{}

type brokenCardKey struct{ pub crypto.PublicKey }

func (k brokenCardKey) Public() crypto.PublicKey { return k.pub }
func (k brokenCardKey) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("device error 0x0100000A")
}
func (k brokenCardKey) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("device error 0x0100000A")
}
func (k brokenCardKey) Backend() string { return "brokencard" }
func (k brokenCardKey) Close() error    { return nil }

func (brokenCardBackend) Open(ctx context.Context, ref *accel.Ref) (accel.Key, error) {
	k, err := accel.Open(ctx, "file:"+ref.Path)
	if err != nil {
		return nil, err
	}
	return brokenCardKey{k.Public()}, nil
}

func init() { accel.Register("brokencard", brokenCardBackend{}) }

// A key on a device is exercised before it serves: a card that reports
// the certificate's public key but cannot use the key is refused, with
// the field.
func TestDeviceKeysAreSelfTested(t *testing.T) {
	good := writeTestPair(t, newTestCA(t, false), t.TempDir(), "card", nil, "card.example.cn")
	f := files(good)
	f.SignKey = "brokencard:" + good.SignKey
	f.EncKey = "brokencard:" + good.EncKey
	_, _, err := LoadTLCPFiles(f, LoadOptions{})
	if err == nil {
		t.Fatal("a card that cannot sign was accepted")
	}
	var fields []string
	for _, e := range joined(err) {
		fields = append(fields, e.(*FieldError).Field)
	}
	if len(fields) != 2 || fields[0] != "sign_key" || fields[1] != "enc_key" {
		t.Errorf("fields %v: %v", fields, err)
	}
	wantAll(t, err.Error(), "sign_key brokencard:"+good.SignKey+": self-test failed", "device error 0x0100000A", "enc_key brokencard:")
}

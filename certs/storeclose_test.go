package certs

import (
	"context"
	"crypto"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/internal/testlog"
)

// trackedBackend opens file keys as a device would hold them: every Open
// makes a new key, and a closed key refuses to work. With fail-close=1 in
// the reference, Close reports an error, as a device that closes in the
// background does.
type trackedBackend struct{}

type trackedKey struct {
	accel.Key
	closed   chan struct{}
	once     sync.Once
	closeErr error
}

var tracked struct {
	sync.Mutex
	keys []*trackedKey
}

func (trackedBackend) Open(ctx context.Context, ref *accel.Ref) (accel.Key, error) {
	k, err := accel.Open(ctx, "file:"+ref.Path)
	if err != nil {
		return nil, err
	}
	tk := &trackedKey{Key: k, closed: make(chan struct{})}
	if ref.Params.Get("fail-close") == "1" {
		tk.closeErr = errors.New("the device closes in the background: a call on it has not returned")
	}
	tracked.Lock()
	tracked.keys = append(tracked.keys, tk)
	tracked.Unlock()
	return tk, nil
}

func (k *trackedKey) isClosed() bool {
	select {
	case <-k.closed:
		return true
	default:
		return false
	}
}

func (k *trackedKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if k.isClosed() {
		return nil, errors.New("key is closed")
	}
	return k.Key.Sign(r, digest, opts)
}

func (k *trackedKey) Decrypt(r io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	if k.isClosed() {
		return nil, errors.New("key is closed")
	}
	return k.Key.(crypto.Decrypter).Decrypt(r, msg, opts)
}

func (k *trackedKey) Close() error {
	k.once.Do(func() { close(k.closed) })
	return k.closeErr
}

func init() { accel.Register("tracked", trackedBackend{}) }

// trackedKeys returns the keys opened since the test began.
func trackedKeys(t *testing.T) func() []*trackedKey {
	tracked.Lock()
	from := len(tracked.keys)
	tracked.Unlock()
	return func() []*trackedKey {
		tracked.Lock()
		defer tracked.Unlock()
		return append([]*trackedKey(nil), tracked.keys[from:]...)
	}
}

func trackedStore(t *testing.T, opts StoreOptions, params string) *Store {
	t.Helper()
	d := writeTestPair(t, newTestCA(t, false), t.TempDir(), "card", nil, "card.example.cn")
	f := files(d)
	f.SignKey = "tracked:" + d.SignKey + params
	f.EncKey = "tracked:" + d.EncKey + params
	s, err := NewStore(opts, Source{Name: "edge", TLCP: &f})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitClosed(t *testing.T, k *trackedKey) {
	t.Helper()
	select {
	case <-k.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a replaced key was not closed")
	}
}

// A reload closes the keys of the set it replaced once CloseDelay has
// passed, and leaves the keys in service open.
func TestReloadClosesReplacedKeys(t *testing.T) {
	keys := trackedKeys(t)
	s := trackedStore(t, StoreOptions{Logger: slog.New(slog.DiscardHandler), CloseDelay: 10 * time.Millisecond}, "")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	opened := keys()
	if len(opened) != 4 {
		t.Fatalf("%d keys opened, want 2 per load", len(opened))
	}
	waitClosed(t, opened[0])
	waitClosed(t, opened[1])
	for _, k := range opened[2:] {
		if k.isClosed() {
			t.Fatal("a key in service was closed")
		}
	}
	s.Close()
	for _, k := range opened[2:] {
		if !k.isClosed() {
			t.Fatal("Close left a key in service open")
		}
	}
}

// Until CloseDelay has passed, a handshake that chose the replaced
// certificate before the reload still has its keys; Close closes them at
// once.
func TestReloadKeepsReplacedKeysForHandshakes(t *testing.T) {
	keys := trackedKeys(t)
	s := trackedStore(t, StoreOptions{Logger: slog.New(slog.DiscardHandler), CloseDelay: time.Hour}, "")
	chosen, err := s.GetTLCPCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := chosen.SignKey.(crypto.Signer).Sign(nil, make([]byte, 32), crypto.Hash(0)); err != nil {
		t.Fatalf("the key a handshake chose before the reload: %v", err)
	}
	if s.Closed() {
		t.Fatal("the store says its keys are closed while the replaced set waits")
	}
	s.Close()
	for i, k := range keys() {
		if !k.isClosed() {
			t.Errorf("key %d left open by Close", i)
		}
	}
	if !s.Closed() {
		t.Error("the store says keys are open after Close")
	}
	if err := s.Reload(); err == nil {
		t.Error("a closed store reloaded")
	}
	for _, k := range keys()[4:] {
		k.Close()
		t.Error("a closed store opened keys")
	}
}

// A key that reports an error on Close is logged with the source and the
// key, not silently dropped.
func TestKeyCloseErrorIsLogged(t *testing.T) {
	logs := &testlog.Buffer{}
	s := trackedStore(t, StoreOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))}, "?fail-close=1")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := logs.String()
	if n := strings.Count(out, `level=WARN msg="closing a private key" name=edge key="tlcp sign_key" cause="the device closes in the background`); n != 2 {
		t.Errorf("%d warnings for the sign key, want one for the replaced key and one at Close:\n%s", n, out)
	}
	if !strings.Contains(out, `key="tlcp enc_key"`) {
		t.Errorf("no warning for the encryption key:\n%s", out)
	}
}

// Package testkeys registers, for tests, the key scheme "tracked:": file
// keys opened as a crypto card holds them. Every Open makes a new key,
// whose Close is recorded; a closed key refuses to sign or decrypt; with
// fail-close=1 in the reference, Close reports an error, as a device that
// closes in the background does.
package testkeys

import (
	"context"
	"crypto"
	"errors"
	"io"
	"sync"

	"github.com/gmgate/gmgate/accel"
)

// Scheme is the key reference scheme: "tracked:" + a key file's path.
const Scheme = "tracked"

// Key is a key opened through Scheme.
type Key struct {
	accel.Key
	closed   chan struct{}
	once     sync.Once
	closeErr error
}

// Closed is closed when the key is.
func (k *Key) Closed() <-chan struct{} { return k.closed }

// IsClosed reports whether the key was closed.
func (k *Key) IsClosed() bool {
	select {
	case <-k.closed:
		return true
	default:
		return false
	}
}

var errClosed = errors.New("key is closed")

func (k *Key) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if k.IsClosed() {
		return nil, errClosed
	}
	return k.Key.Sign(r, digest, opts)
}

func (k *Key) Decrypt(r io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	if k.IsClosed() {
		return nil, errClosed
	}
	return k.Key.(crypto.Decrypter).Decrypt(r, msg, opts)
}

func (k *Key) Close() error {
	k.once.Do(func() { close(k.closed) })
	return k.closeErr
}

var opened struct {
	sync.Mutex
	keys []*Key
}

type backend struct{}

func (backend) Open(ctx context.Context, ref *accel.Ref) (accel.Key, error) {
	k, err := accel.Open(ctx, "file:"+ref.Path)
	if err != nil {
		return nil, err
	}
	tk := &Key{Key: k, closed: make(chan struct{})}
	if ref.Params.Get("fail-close") == "1" {
		tk.closeErr = errors.New("the device closes in the background: a call on it has not returned")
	}
	opened.Lock()
	opened.keys = append(opened.keys, tk)
	opened.Unlock()
	return tk, nil
}

func init() { accel.Register(Scheme, backend{}) }

// Since returns a function listing the keys opened since Since was
// called, in the order they opened.
func Since() func() []*Key {
	opened.Lock()
	from := len(opened.keys)
	opened.Unlock()
	return func() []*Key {
		opened.Lock()
		defer opened.Unlock()
		return append([]*Key(nil), opened.keys[from:]...)
	}
}

// Package accel opens private keys by reference, whichever backend holds
// them: a PEM file in memory ("software") or a crypto card through the SDF
// interface of GM/T 0018 ("sdf"). Every key comes back as a crypto.Signer
// (and crypto.Decrypter where the key can decrypt), which is all the
// protocol code sees.
//
// A key reference is a URI-like string:
//
//	/etc/gmgate/sign.key                         a PEM key file (same as file:)
//	file:/etc/gmgate/sign.key                    a PEM key file
//	file:/etc/gmgate/enc.key?password-env=KEYPW  an encrypted PKCS#8 key, password from $KEYPW
//	file:/etc/gmgate/enc.key?password-file=/run/secrets/keypw
//	sdf:/opt/vendor/libsdf.so?index=1&key=sign&pin-env=SDF_PIN&sessions=16
//	                                             a key on a crypto card (see package sdf)
//
// Secrets are never written into a reference: ParseRef refuses a pin= or
// password= in any case or percent-encoding, and String and the errors of
// this package hide the whole query of a reference. Other schemes may be
// registered by their backends (see Register). docs/keys.md describes the
// references for operators.
//
// A key is checked against its certificate with SelfTest before it
// serves. Encryption keys that must take part in SM2 key agreement (the
// ECDHE suites) are checked with RequireKeyAgreement: only software keys
// can.
//
// accel reports operations through an Observer and does not import any
// metrics library; it must not import the protocol or proxy packages.
package accel

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/accel/internal/observe"
	"github.com/gmgate/gmgate/accel/internal/secret"
	"github.com/gmgate/gmgate/internal/keyref"
)

// Key is an opened private key.
type Key interface {
	crypto.Signer
	// Backend names the backend holding the key ("software", "sdf").
	Backend() string
	// Close releases what the key holds (sessions, device handles).
	Close() error
}

// Ref is a parsed key reference.
type Ref struct {
	Scheme string
	// Path is the file or library path.
	Path string
	// Params are the query parameters.
	Params url.Values
	raw    string
}

// String returns the reference with its query hidden (scheme:path?REDACTED),
// so the result is safe for logs and errors whatever the query holds.
func (r *Ref) String() string { return secret.Redact(r.raw) }

// ParseRef parses a key reference. A string without a scheme is a file
// path.
func ParseRef(s string) (*Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty key reference")
	}
	if _, query, ok := strings.Cut(s, "?"); ok {
		if name, found := keyref.InlineSecret(query); found {
			return nil, fmt.Errorf("key reference %q: the %s may not be written in the key reference; use %s-env=VAR or %s-file=PATH", secret.Redact(s), name, name, name)
		}
	}
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || len(scheme) < 2 {
		// A bare path (also "C:..." is not expected on our platforms).
		return &Ref{Scheme: "file", Path: s, Params: url.Values{}, raw: s}, nil
	}
	scheme = strings.ToLower(scheme)
	path, query, _ := strings.Cut(rest, "?")
	path = strings.TrimPrefix(path, "//")
	params, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("key reference %q: bad parameters: %v", secret.Redact(s), err)
	}
	if path == "" {
		return nil, fmt.Errorf("key reference %q has no path", secret.Redact(s))
	}
	return &Ref{Scheme: scheme, Path: path, Params: params, raw: s}, nil
}

// Backend opens keys of one scheme.
type Backend interface {
	Open(ctx context.Context, ref *Ref) (Key, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// Register makes a backend available under scheme. It panics if the scheme
// is taken, as a programming error.
func Register(scheme string, b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("accel: backend registered twice for scheme " + scheme)
	}
	registry[scheme] = b
}

// Schemes lists the registered schemes.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Checker is a Backend that can tell whether a reference is one it would
// try to open (its parameters and how its secrets are named) without
// opening a key, a device or a secret.
type Checker interface {
	Check(ref *Ref) error
}

// Open opens the key a reference names.
func Open(ctx context.Context, ref string) (Key, error) {
	r, b, err := backendOf(ref)
	if err != nil {
		return nil, err
	}
	return b.Open(ctx, r)
}

// Check reports what Open would refuse in a reference before it opens
// anything: the scheme, and the parameters of backends that are
// Checkers. It reads no key, secret or library.
func Check(ref string) error {
	r, b, err := backendOf(ref)
	if err != nil {
		return err
	}
	if c, ok := b.(Checker); ok {
		return c.Check(r)
	}
	return nil
}

// backendOf parses a reference and finds its backend.
func backendOf(ref string) (*Ref, Backend, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, nil, err
	}
	registryMu.RLock()
	b, ok := registry[r.Scheme]
	registryMu.RUnlock()
	if !ok {
		return nil, nil, fmt.Errorf("key reference %q: unknown scheme %q (known: %s)", r, r.Scheme, strings.Join(Schemes(), ", "))
	}
	return r, b, nil
}

// Observer receives what backends do, for metrics. Implementations must be
// safe for concurrent use and fast.
type Observer = observe.Observer

// observer holds the installed Observer; nil for none.
var observer atomic.Pointer[Observer]

// SetObserver installs the observer (nil removes it).
func SetObserver(o Observer) {
	if o == nil {
		observer.Store(nil)
		return
	}
	observer.Store(&o)
}

// currentObserver returns the installed observer or a no-op one.
func currentObserver() Observer {
	if o := observer.Load(); o != nil {
		return *o
	}
	return observe.Nop{}
}

// ObserveOp reports an operation to the installed observer; for backends.
func ObserveOp(backend, op string, start time.Time, err error) {
	currentObserver().Op(backend, op, err, time.Since(start))
}

//go:build cgo

package sdf_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"go.uber.org/goleak"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/internal/softsdf"
	"github.com/gmgate/gmgate/internal/testpki"
)

// buildDir holds the libraries built once per test binary; each test
// loads a copy of its own, which is a separate device.
var (
	buildDir string
	buildMu  sync.Mutex
	builds   = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "softsdf-build-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left running:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// library returns a private copy of softsdf built with options.
func library(t testing.TB, options ...string) string {
	t.Helper()
	if err := softsdf.Available(); err != nil {
		t.Skipf("cannot build the software SDF library: %v", err)
	}
	key := strings.Join(options, " ")
	buildMu.Lock()
	path, ok := builds[key]
	if !ok {
		var err error
		path, err = softsdf.Build(buildDir, fmt.Sprintf("libsoftsdf-%d.so", len(builds)), options...)
		if err != nil {
			buildMu.Unlock()
			t.Fatal(err)
		}
		builds[key] = path
	}
	buildMu.Unlock()
	lib, err := softsdf.Copy(path, t.TempDir(), "libsoftsdf.so")
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func osWriteFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// card is the key material of a softsdf device.
type card struct {
	dir, pinFile, pin string
	sign, enc         map[uint32]*sm2.PrivateKey
}

const testPIN = "11223344"

// newCard writes signing and encryption key pairs for the indexes into a
// key directory, encrypted with testPIN, and points softsdf at it.
func newCard(t testing.TB, indexes ...uint32) *card {
	t.Helper()
	k := softsdf.NewCard(t, t.TempDir(), testPIN, indexes...)
	t.Setenv("SOFTSDF_KEYDIR", k.Dir)
	return &card{dir: k.Dir, pinFile: k.PINFile, pin: k.PIN, sign: k.Sign, enc: k.Enc}
}

// ref builds an sdf: reference with the card's PIN file.
func (c *card) ref(lib string, index uint32, key string, extra string) string {
	r := fmt.Sprintf("sdf:%s?index=%d&key=%s&pin-file=%s", lib, index, key, c.pinFile)
	if extra != "" {
		r += "&" + extra
	}
	return r
}

// cardServer opens the signing and encryption keys of index 1 on a
// softsdf device.
func cardServer(t testing.TB, extra string) (lib string, c *card, sign, enc accel.Key) {
	lib = library(t)
	c = newCard(t, 1)
	return lib, c, openKey(t, c.ref(lib, 1, "sign", extra)), openKey(t, c.ref(lib, 1, "enc", extra))
}

func openKey(t testing.TB, ref string) accel.Key {
	t.Helper()
	k, err := accel.Open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func loadLib(t testing.TB, path string) *softsdf.Lib {
	t.Helper()
	l, err := softsdf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newPKI returns a test CA for TLCP certificates.
func newPKI(t testing.TB) *testpki.CA {
	t.Helper()
	return testpki.NewCA(t, "gmgate accel test CA")
}

// issue returns a DER leaf certificate from ca for pub, named cn in its
// subject and DNS names; enc picks the encryption certificate's key usages.
func issue(t testing.TB, ca *testpki.CA, cn string, pub *ecdsa.PublicKey, enc bool) []byte {
	t.Helper()
	return ca.Issue(t, testpki.Template(cn, []string{cn}, enc), pub)
}

func parseCert(t testing.TB, der []byte) *smx509.Certificate {
	t.Helper()
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pubOf(k any) *ecdsa.PublicKey {
	switch k := k.(type) {
	case *sm2.PrivateKey:
		return &k.PublicKey
	case crypto.Signer:
		return k.Public().(*ecdsa.PublicKey)
	}
	return nil
}

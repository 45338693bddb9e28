package certs

import (
	"crypto"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testkeys"
	"github.com/gmgate/gmgate/internal/testlog"
)

// trackedStore serves one TLCP certificate, "edge", with both keys of the
// tracked key scheme (internal/testkeys), params added to each reference.
func trackedStore(t *testing.T, opts StoreOptions, params string) *Store {
	t.Helper()
	d := writeTestPair(t, newTestCA(t, false), t.TempDir(), "card", nil, "card.example.cn")
	f := files(d)
	f.SignKey = testkeys.Scheme + ":" + d.SignKey + params
	f.EncKey = testkeys.Scheme + ":" + d.EncKey + params
	s, err := NewStore(opts, Source{Name: "edge", TLCP: &f})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitClosed(t *testing.T, k *testkeys.Key) {
	t.Helper()
	select {
	case <-k.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("a replaced key was not closed")
	}
}

// A reload closes the keys of the set it replaced once CloseDelay has
// passed, and leaves the keys in service open.
func TestReloadClosesReplacedKeys(t *testing.T) {
	keys := testkeys.Since()
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
		if k.IsClosed() {
			t.Fatal("a key in service was closed")
		}
	}
	s.Close()
	for _, k := range opened[2:] {
		if !k.IsClosed() {
			t.Fatal("Close left a key in service open")
		}
	}
}

// Until CloseDelay has passed, a handshake that chose the replaced
// certificate before the reload still has its keys; Close closes them at
// once.
func TestReloadKeepsReplacedKeysForHandshakes(t *testing.T) {
	keys := testkeys.Since()
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
		if !k.IsClosed() {
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

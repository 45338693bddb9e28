//go:build cgo

package sdf_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/accel/sdf"
)

// TestCloseDuringHungCall: a library call that does not return (a hung
// link to an HSM) holds neither the Close of the last key on its device
// nor the keys of other libraries; the library is not opened again while
// its previous device is still closing, and once the call returns the
// previous device is closed and the library opens again.
func TestCloseDuringHungCall(t *testing.T) {
	lib, other := library(t), library(t)
	c := newCard(t, 1)
	ctl := loadLib(t, lib)
	ctx := context.Background()
	config := func(lib, timeout string) sdf.Config {
		t.Helper()
		cfg, err := sdf.ParseConfig(lib, url.Values{"index": {"1"}, "key": {"sign"}, "pin-file": {c.pinFile}, "sessions": {"2"}, "timeout": {timeout}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	key, err := sdf.Open(ctx, config(lib, "1s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctl.Control("hang", 1)
	t.Cleanup(func() { ctl.Control("hang", 0) })
	signed := make(chan error, 1)
	go func() {
		_, err := key.Sign(rand.Reader, []byte("hung"), sm2.DefaultSM2SignerOpts)
		signed <- err
	}()
	waitFor(t, "the call to reach the device", func() bool { return ctl.Stats().CallsNow == 1 })

	closed := make(chan error, 1)
	go func() { closed <- key.Close() }()
	opened := make(chan error, 1)
	var otherKey *sdf.Key
	go func() {
		var err error
		otherKey, err = sdf.Open(ctx, config(other, "1s"), nil)
		opened <- err
	}()
	if err := await(t, "the Close of the last key on a device whose call hangs", closed); err == nil || !strings.Contains(err.Error(), lib) || !strings.Contains(err.Error(), "has not returned") {
		t.Errorf("Close: %v, want the device's pending close named", err)
	}
	if err := await(t, "opening a key on another library", opened); err != nil {
		t.Fatalf("another library's key: %v", err)
	}
	t.Cleanup(func() { otherKey.Close() })
	if err := await(t, "the hung call's caller", signed); !errors.Is(err, sdf.ErrTimeout) {
		t.Errorf("hung call: %v, want a timeout", err)
	}

	// The library is not opened a second time beside the device still
	// closing: the open waits for it within its timeout and says why.
	_, err = sdf.Open(ctx, config(lib, "1s"), nil)
	if err == nil || !strings.Contains(err.Error(), "SDF library "+lib) || !strings.Contains(err.Error(), "a call on it has not returned") {
		t.Errorf("open during the hang: %v", err)
	}
	if s := ctl.Stats(); s.DeviceOpens != 1 || s.DeviceCloses != 0 {
		t.Errorf("device opened %d times and closed %d times while its call hangs, want 1 and 0", s.DeviceOpens, s.DeviceCloses)
	}

	// An open that may wait long enough opens the library once the call
	// returned and the previous device closed.
	go func() {
		k, err := sdf.Open(ctx, config(lib, "30s"), nil)
		if err == nil {
			err = k.Close()
		}
		opened <- err
	}()
	ctl.Control("hang", 0)
	if err := await(t, "opening the library again once the call returned", opened); err != nil {
		t.Fatalf("open after the call returned: %v", err)
	}
	if s := ctl.Stats(); s.SessionsOpen != 0 || s.CallsNow != 0 || s.DeviceOpens != 2 || s.DeviceCloses != 2 || s.BusyViolations != 0 {
		t.Errorf("after the last key closed: %d sessions open, %d calls, %d device opens, %d closes, %d overlapping calls; want 0, 0, 2, 2, 0",
			s.SessionsOpen, s.CallsNow, s.DeviceOpens, s.DeviceCloses, s.BusyViolations)
	}
}

// TestOpenWhoseSelfTestHangs: a card that hangs while a key opens (at
// start-up or in a reload) fails that key's Open within its timeout,
// instead of holding it and every other key's Open for as long as the
// call hangs; the device closes once the call returns.
func TestOpenWhoseSelfTestHangs(t *testing.T) {
	lib, other := library(t), library(t)
	c := newCard(t, 1)
	ctl := loadLib(t, lib)
	ctl.Control("hang", 1)
	t.Cleanup(func() { ctl.Control("hang", 0) })
	opened := make(chan error, 1)
	go func() {
		k, err := accel.Open(context.Background(), c.ref(lib, 1, "sign", "sessions=2&timeout=1s"))
		if err == nil {
			k.Close()
		}
		opened <- err
	}()
	if err := await(t, "opening a key whose self-test hangs", opened); !errors.Is(err, sdf.ErrTimeout) || !strings.Contains(err.Error(), "self-test signature") {
		t.Fatalf("open: %v, want the self-test's timeout", err)
	}
	openKey(t, c.ref(other, 1, "sign", ""))
	if s := ctl.Stats(); s.CallsNow != 1 || s.DeviceCloses != 0 {
		t.Fatalf("%d calls in progress, %d device closes: want the hung call and the device still open", s.CallsNow, s.DeviceCloses)
	}
	ctl.Control("hang", 0)
	waitFor(t, "the device to close once the call returned", func() bool {
		s := ctl.Stats()
		return s.DeviceCloses == 1 && s.SessionsOpen == 0 && s.CallsNow == 0
	})
	openKey(t, c.ref(lib, 1, "sign", "sessions=2"))
}

// await returns what ch gives, failing the test when nothing comes within
// 10 seconds (a bound far above every timeout involved).
func await(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: it did not happen", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

//go:build cgo

package sdf_test

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
)

// TestDeviceReopenedAtMostEvery200ms: a device that opens but gives no
// session (as a network HSM's library that opens without reaching the
// HSM) is closed and reopened at most every 200ms while that lasts, not
// for every operation; operations fail with the device's error, and
// service resumes when sessions open again.
func TestDeviceReopenedAtMostEvery200ms(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)
	sign := openKey(t, c.ref(lib, 1, "sign", "sessions=2"))
	ctl := loadLib(t, lib)
	ctl.Control("session_fail", 0x01000004) // SDR_HARDFAIL
	ctl.Control("reset", 1)
	opens := ctl.Stats().DeviceOpens
	start := time.Now()
	for range 50 {
		_, err := sign.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts)
		if err == nil || !strings.Contains(err.Error(), "SDR_HARDFAIL") {
			t.Fatalf("sign while no session opens: %v", err)
		}
	}
	reopens := ctl.Stats().DeviceOpens - opens
	if most := uint64(time.Since(start)/(200*time.Millisecond)) + 1; reopens > most {
		t.Errorf("the device was reopened %d times in %v, want at most %d", reopens, time.Since(start).Round(time.Millisecond), most)
	}
	ctl.Control("session_fail", 0)
	recovered(t, func() error {
		sig, err := sign.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts)
		if err == nil && !sm2.VerifyASN1WithSM2(&c.sign[1].PublicKey, nil, []byte("x"), sig) {
			t.Fatal("signature does not verify")
		}
		return err
	})
}

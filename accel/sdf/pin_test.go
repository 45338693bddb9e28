//go:build cgo

package sdf_test

import (
	"crypto"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/internal/softsdf"
)

// changePIN re-encrypts the keys of an index with pin, as when the card's
// PIN is changed by its administrator.
func (c *card) changePIN(t *testing.T, index uint32, pin string) {
	t.Helper()
	softsdf.WriteKey(t, c.dir, fmt.Sprintf("sign-%d", index), c.sign[index], pin)
	softsdf.WriteKey(t, c.dir, fmt.Sprintf("enc-%d", index), c.enc[index], pin)
}

// changedPIN is the PIN the card takes after changePIN in the tests.
const changedPIN = "87654321"

// servingWhenPINChanged opens the signing key of index 1 with the
// parameters extra, then changes the card's PIN to changedPIN and resets
// the device, so that every session must obtain the access right again.
func servingWhenPINChanged(t *testing.T, extra string) (lib string, c *card, sign accel.Key, ctl *softsdf.Lib) {
	t.Helper()
	lib = library(t)
	c = newCard(t, 1)
	sign = openKey(t, c.ref(lib, 1, "sign", extra))
	ctl = loadLib(t, lib)
	c.changePIN(t, 1, changedPIN)
	ctl.Control("reset", 1)
	return lib, c, sign, ctl
}

// TestPINRefusedWhileServingIsTriedOnce: when every session needs the
// access right again (after a device reset) and the card no longer takes
// the PIN, the PIN is offered once, not once per session: cards lock a
// key after a few failures.
func TestPINRefusedWhileServingIsTriedOnce(t *testing.T) {
	_, _, sign, ctl := servingWhenPINChanged(t, "sessions=8")
	before := ctl.Stats().AccessDenied

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sign.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "the device refused the PIN") {
			t.Errorf("sign with a refused PIN: %v", err)
		}
	}
	if d := ctl.Stats().AccessDenied - before; d != 1 {
		t.Errorf("the refused PIN was offered %d times, want once", d)
	}
}

// TestRefusedPINIsNotOfferedByTheOtherKey: a start-up opens the signing
// key and then the encryption key of an index with the same PIN; when the
// card refuses it for the first, the second does not offer it again (two
// attempts per start would lock a card that allows three after two
// starts), and says so in the same words. Another PIN is offered.
func TestRefusedPINIsNotOfferedByTheOtherKey(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)
	bad := t.TempDir() + "/pin"
	writeFile(t, bad, "99999999")
	before := loadLib(t, lib).Stats().AccessDenied
	for _, key := range []string{"sign", "enc", "sign"} {
		openErr(t, strings.Replace(c.ref(lib, 1, key, ""), c.pinFile, bad, 1),
			"the device refused the PIN from file "+bad+" for key index 1", "SDR_PRKRERR", "No further attempts")
	}
	if d := loadLib(t, lib).Stats().AccessDenied - before; d != 1 {
		t.Errorf("the wrong PIN was offered %d times, want once", d)
	}
	checkSign(t, openKey(t, c.ref(lib, 1, "sign", "")), c.sign[1])
}

// TestReopenedIndexOffersItsPIN: a key opened at an index whose earlier
// keys all closed (while another key kept the device open) has its PIN
// checked; the sessions' access right from the earlier PIN must not let a
// wrong one pass until the next device reset.
func TestReopenedIndexOffersItsPIN(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1, 2)
	openKey(t, c.ref(lib, 2, "sign", "sessions=1"))
	first := openKey(t, c.ref(lib, 1, "sign", "sessions=1"))
	first.Close()

	bad := t.TempDir() + "/pin"
	writeFile(t, bad, "99999999")
	before := loadLib(t, lib).Stats().AccessDenied
	openErr(t, strings.Replace(c.ref(lib, 1, "sign", "sessions=1"), c.pinFile, bad, 1),
		"the device refused the PIN from file "+bad+" for key index 1")
	if d := loadLib(t, lib).Stats().AccessDenied - before; d != 1 {
		t.Errorf("the wrong PIN was offered %d times, want once", d)
	}
	// The right PIN opens the index again.
	k := openKey(t, c.ref(lib, 1, "sign", "sessions=1"))
	checkSign(t, k, c.sign[1])
}

// TestCorrectedPINAfterRefusal: once the device refused an index's PIN
// while serving (its PIN was changed), a key opened with the new PIN, as a
// reload with the corrected pin-file opens it, replaces the refused one
// for every key at the index; the same PIN is not offered again.
func TestCorrectedPINAfterRefusal(t *testing.T) {
	lib, c, old, ctl := servingWhenPINChanged(t, "sessions=2")
	if _, err := old.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts); err == nil || !strings.Contains(err.Error(), "the device refused the PIN") {
		t.Fatalf("sign after the PIN changed: %v", err)
	}

	denied := ctl.Stats().AccessDenied
	openErr(t, c.ref(lib, 1, "enc", "sessions=2"), "the device refused the PIN")
	if d := ctl.Stats().AccessDenied - denied; d != 0 {
		t.Errorf("the refused PIN was offered %d more times", d)
	}

	newPIN := t.TempDir() + "/pin"
	writeFile(t, newPIN, changedPIN+"\n")
	ref := strings.Replace(c.ref(lib, 1, "sign", "sessions=2"), c.pinFile, newPIN, 1)
	reloaded := openKey(t, ref)
	checkSign(t, reloaded, c.sign[1])
	checkSign(t, old, c.sign[1])
	old.Close()
	checkSign(t, reloaded, c.sign[1])
}

// TestCorrectedPINKeepsKeyChecks: when a reload opens a key of an index
// again with the corrected PIN after the card refused the old one, the
// keys still open at the index keep the check of their public keys: a
// card that then holds another encryption key there is refused for the
// encryption key, which was not opened again.
func TestCorrectedPINKeepsKeyChecks(t *testing.T) {
	lib, c, sign, encKey := cardServer(t, "")
	enc := encKey.(crypto.Decrypter)
	ctl := loadLib(t, lib)
	ct, err := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, make([]byte, 48))
	if err != nil {
		t.Fatal(err)
	}
	c.changePIN(t, 1, changedPIN)
	ctl.Control("reset", 1)
	if _, err := sign.Sign(rand.Reader, []byte("refused"), sm2.DefaultSM2SignerOpts); err == nil {
		t.Fatal("signed after the card refused the PIN")
	}
	pinFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pinFile, []byte(changedPIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openKey(t, fmt.Sprintf("sdf:%s?index=1&key=sign&pin-file=%s", lib, pinFile))

	softsdf.GenerateKey(t, c.dir, "enc-1", changedPIN)
	ctl.Control("reset", 1)
	_, err = enc.Decrypt(rand.Reader, ct, nil)
	if err == nil || !strings.Contains(err.Error(), "now holds another enc key at index 1") {
		t.Fatalf("decrypt with the encryption key replaced: %v, want the replaced key named", err)
	}
}

// TestRefusedPINIsNotOfferedThroughAnotherPath: the record of refused PINs
// follows the library, not the way a reference spells its path: a reload
// that names the library through a symbolic link (or its real path, after
// one) does not offer the refused PIN again once the device closed.
func TestRefusedPINIsNotOfferedThroughAnotherPath(t *testing.T) {
	lib := library(t)
	link := t.TempDir() + "/libsdf.so"
	if err := os.Symlink(lib, link); err != nil {
		t.Fatal(err)
	}
	c := newCard(t, 1)
	bad := t.TempDir() + "/pin"
	writeFile(t, bad, "99999999")
	before := loadLib(t, lib).Stats().AccessDenied
	for _, path := range []string{link, lib, link} {
		openErr(t, strings.Replace(c.ref(path, 1, "sign", ""), c.pinFile, bad, 1),
			"the device refused the PIN from file "+bad+" for key index 1", "No further attempts")
	}
	if d := loadLib(t, lib).Stats().AccessDenied - before; d != 1 {
		t.Errorf("the wrong PIN was offered %d times, want once", d)
	}
}

//go:build cgo

package sdf_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/accel/sdf"
	"github.com/gmgate/gmgate/internal/softsdf"
)

// checkSign signs through key and verifies with gmsm against want, the
// public key the card's file holds (not the one the backend exported).
func checkSign(t *testing.T, key crypto.Signer, want *sm2.PrivateKey) {
	t.Helper()
	for _, n := range []int{0, 1, 64, 4000} {
		msg := make([]byte, n)
		rand.Read(msg)
		sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
		if err != nil {
			t.Fatalf("sign %d bytes: %v", n, err)
		}
		if !sm2.VerifyASN1WithSM2(&want.PublicKey, nil, msg, sig) {
			t.Fatalf("signature over %d bytes does not verify with gmsm", n)
		}
	}
	// A custom user ID is honoured, and a 32-byte e is signed as it is.
	msg := []byte("with another user ID")
	sig, err := key.Sign(rand.Reader, msg, sm2.NewSM2SignerOption(true, []byte("alice@example.cn")))
	if err != nil || !sm2.VerifyASN1WithSM2(&want.PublicKey, []byte("alice@example.cn"), msg, sig) {
		t.Fatalf("custom user ID: %v", err)
	}
	e, _ := sm2.CalculateSM2Hash(&want.PublicKey, msg, nil)
	sig, err = key.Sign(rand.Reader, e, crypto.Hash(0))
	if err != nil || !sm2.VerifyASN1(&want.PublicKey, e, sig) {
		t.Fatalf("pre-computed e: %v", err)
	}
}

// checkDecrypt decrypts, through key, what gmsm encrypted to want.
func checkDecrypt(t *testing.T, key crypto.Decrypter, want *sm2.PrivateKey) {
	t.Helper()
	// Not shorter messages: when the KDF output is all zero (once in 256
	// for a 1-byte message) gmsm v0.44.1's Encrypt draws a new k but keeps
	// multiplying the public key it overwrote, and makes a ciphertext that
	// neither gmsm nor OpenSSL decrypts.
	for _, n := range []int{16, 48, 136} {
		msg := make([]byte, n)
		rand.Read(msg)
		ct, err := sm2.EncryptASN1(rand.Reader, &want.PublicKey, msg)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := key.Decrypt(rand.Reader, ct, nil)
		if err != nil || !bytes.Equal(pt, msg) {
			t.Fatalf("decrypt %d bytes: %v", n, err)
		}
		raw, _ := sm2.ASN1Ciphertext2Plain(ct, nil)
		if pt, err := key.Decrypt(rand.Reader, raw, nil); err != nil || !bytes.Equal(pt, msg) {
			t.Fatalf("decrypt raw C1C3C2: %v", err)
		}
		ct[len(ct)-1] ^= 1
		if _, err := key.Decrypt(rand.Reader, ct, nil); !errors.Is(err, sdf.ErrDecryption) {
			t.Fatalf("tampered ciphertext: got %v, want ErrDecryption", err)
		}
	}
}

func TestSignAndDecrypt(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1, 2)
	sign := openKey(t, c.ref(lib, 1, "sign", ""))
	enc := openKey(t, c.ref(lib, 1, "enc", ""))
	sign2 := openKey(t, c.ref(lib, 2, "sign", ""))
	if sign.Backend() != "sdf" {
		t.Errorf("backend %q", sign.Backend())
	}
	if !pubOf(sign).Equal(&c.sign[1].PublicKey) || !pubOf(enc).Equal(&c.enc[1].PublicKey) || !pubOf(sign2).Equal(&c.sign[2].PublicKey) {
		t.Fatal("exported public keys differ from the card's keys")
	}
	checkSign(t, sign, c.sign[1])
	checkSign(t, sign2, c.sign[2])
	checkDecrypt(t, enc.(crypto.Decrypter), c.enc[1])

	before := loadLib(t, lib).Stats()
	if _, err := sign.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts); err != nil {
		t.Fatal(err)
	}
	if after := loadLib(t, lib).Stats(); after.Signs != before.Signs+1 || after.DeviceOpens != 1 {
		t.Errorf("the device saw %d signatures and %d opens, want 1 more and one device", after.Signs-before.Signs, after.DeviceOpens)
	}

	// Each key refuses the other pair's operation.
	if _, err := enc.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts); err == nil || !strings.Contains(err.Error(), "cannot sign; use key=sign") {
		t.Errorf("sign with the enc key: %v", err)
	}
	if _, err := sign.(crypto.Decrypter).Decrypt(rand.Reader, []byte{0x30}, nil); err == nil || !strings.Contains(err.Error(), "cannot decrypt; use key=enc") {
		t.Errorf("decrypt with the sign key: %v", err)
	}
	if _, err := sign.Sign(rand.Reader, make([]byte, 32), crypto.SHA256); err == nil {
		t.Error("SHA-256 options accepted")
	}
	if accel.SupportsKeyAgreement(enc) {
		t.Error("an SDF key claims SM2 key agreement")
	}
	info, err := sign.(*sdf.Key).DeviceInfo(context.Background())
	if err != nil || info.Device != "softsdf" || info.Issuer != "gmgate test" || info.Serial != "0000000000000001" || info.StandardVersion != 1 {
		t.Errorf("device info %+v, %v", info, err)
	}
}

func TestProfiles(t *testing.T) {
	tests := []struct {
		name  string
		build []string
		env   map[string]string
		extra string
	}{
		{"standard", nil, nil, "profile=standard"},
		{"tongsuo", []string{softsdf.DecryptVariant(2)}, nil, "profile=tongsuo"},
		{"v3", []string{softsdf.DecryptVariant(3)}, nil, "decrypt=v3"},
		{"v4", []string{softsdf.DecryptVariant(4)}, nil, "decrypt=v4"},
		{"legacy", nil, map[string]string{"SOFTSDF_ALG_IDS": "legacy"}, "profile=legacy"},
		{"sansec2008", nil, map[string]string{"SOFTSDF_ALG_IDS": "legacy", "SOFTSDF_COORD": "32", "SOFTSDF_CIPHER": "2008"}, "profile=sansec2008"},
		{"32-std", nil, map[string]string{"SOFTSDF_COORD": "32"}, "coord=32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lib := library(t, tc.build...)
			c := newCard(t, 3)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			sign := openKey(t, c.ref(lib, 3, "sign", tc.extra))
			enc := openKey(t, c.ref(lib, 3, "enc", tc.extra))
			checkSign(t, sign, c.sign[3])
			checkDecrypt(t, enc.(crypto.Decrypter), c.enc[3])
			if s := loadLib(t, lib).Stats(); s.Decrypts == 0 || s.Signs == 0 {
				t.Errorf("the device made %d signatures and %d decryptions", s.Signs, s.Decrypts)
			}
		})
	}
}

// openErr opens ref, which must fail with an error containing every want.
func openErr(t *testing.T, ref string, want ...string) error {
	t.Helper()
	k, err := accel.Open(context.Background(), ref)
	if err == nil {
		k.Close()
		t.Fatalf("%s opened", ref)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), testPIN) {
		t.Errorf("error shows the PIN: %v", err)
	}
	return err
}

func TestOpenErrors(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)

	t.Run("library missing", func(t *testing.T) {
		openErr(t, c.ref("/nonexistent/libsdf.so", 1, "sign", ""), "SDF library /nonexistent/libsdf.so does not exist")
	})
	t.Run("not a library", func(t *testing.T) {
		openErr(t, c.ref(c.pinFile, 1, "sign", ""), "cannot load SDF library "+c.pinFile)
	})
	t.Run("required symbol missing", func(t *testing.T) {
		openErr(t, c.ref(library(t, softsdf.OmitSign), 1, "sign", ""), "lacks the required function(s) SDF_InternalSign_ECC")
	})
	t.Run("wrong PIN", func(t *testing.T) {
		bad := t.TempDir() + "/pin"
		writeFile(t, bad, "99999999")
		before := loadLib(t, lib).Stats()
		openErr(t, strings.Replace(c.ref(lib, 1, "sign", "sessions=4"), c.pinFile, bad, 1),
			"the device refused the PIN from file "+bad+" for key index 1", "SDR_PRKRERR", "No further attempts")
		if d := loadLib(t, lib).Stats().AccessDenied - before.AccessDenied; d != 1 {
			t.Errorf("the wrong PIN was tried %d times, want once", d)
		}
	})
	t.Run("no PIN", func(t *testing.T) {
		openErr(t, "sdf:"+lib+"?index=1&key=sign", "SDR_PARDENY", "the device wants a PIN for this key: add pin-env=VAR or pin-file=PATH")
	})
	t.Run("index missing", func(t *testing.T) {
		openErr(t, c.ref(lib, 7, "sign", ""), "SDF key index 7 (sign)", "there is no key at index 7", "check index=")
	})
	t.Run("decrypt none", func(t *testing.T) {
		openErr(t, c.ref(lib, 1, "enc", "decrypt=none"), "key=enc needs SDF_InternalDecrypt_ECC")
	})
	t.Run("algorithm IDs", func(t *testing.T) {
		openErr(t, c.ref(lib, 1, "enc", "profile=legacy"), "self-test decryption", "SDR_ALGNOTSUPPORT", "profile=legacy (coord=64 cipher=std alg-ids=legacy decrypt=v1) does not fit")
	})
	t.Run("coordinate width", func(t *testing.T) {
		lib32 := library(t)
		t.Setenv("SOFTSDF_COORD", "32")
		openErr(t, c.ref(lib32, 1, "sign", ""), "the public key the device exported is not valid", "try coord=32")
	})
	t.Run("cipher layout", func(t *testing.T) {
		lib2008 := library(t)
		t.Setenv("SOFTSDF_COORD", "32")
		t.Setenv("SOFTSDF_CIPHER", "2008")
		openErr(t, c.ref(lib2008, 1, "enc", "coord=32"), "self-test decryption")
	})
	t.Run("device down at start-up", func(t *testing.T) {
		down := library(t)
		loadLib(t, down).Control("down", 1)
		openErr(t, c.ref(down, 1, "sign", ""), "cannot open the device of SDF library "+down, "SDR_COMMFAIL")
	})
	t.Run("more sessions than the licence", func(t *testing.T) {
		t.Setenv("SOFTSDF_MAX_SESSIONS", "3")
		openErr(t, c.ref(library(t), 1, "sign", "sessions=4"), "opened only 3 of the 4 sessions asked for", "SDR_OPENSESSION", "lower sessions= to what the card's licence allows")
	})
	t.Run("conflicting references", func(t *testing.T) {
		openKey(t, c.ref(lib, 1, "sign", "sessions=2"))
		openErr(t, c.ref(lib, 1, "enc", "sessions=3"), "already open with sessions=2", "restart gmgate to change them")
		openErr(t, c.ref(lib, 1, "enc", "sessions=2&profile=tongsuo"), "already open with profile=standard", "restart gmgate to change them")
		openErr(t, c.ref(lib, 1, "enc", "sessions=2&lock-thread=true"), "already open with lock-thread=false, and this reference asks for lock-thread=true")
	})
	t.Run("inline PIN", func(t *testing.T) {
		openErr(t, "sdf:"+lib+"?index=1&key=sign&pin="+testPIN, "may not be written in the key reference", "?REDACTED")
	})
}

func TestPublicKeyMismatch(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1, 2)
	p := newPKI(t)
	sign := openKey(t, c.ref(lib, 1, "sign", ""))
	enc := openKey(t, c.ref(lib, 1, "enc", ""))
	signCert := parseCert(t, issue(t, p, "server.test", &c.sign[1].PublicKey, false))
	encCert := parseCert(t, issue(t, p, "server.test", &c.enc[1].PublicKey, true))
	otherCert := parseCert(t, issue(t, p, "server.test", &c.sign[2].PublicKey, false))
	ctx := context.Background()
	if err := accel.SelfTest(ctx, sign, signCert, accel.UseSign); err != nil {
		t.Fatal(err)
	}
	if err := accel.SelfTest(ctx, enc, encCert, accel.UseEnc); err != nil {
		t.Fatal(err)
	}
	err := accel.SelfTest(ctx, sign, otherCert, accel.UseSign)
	if err == nil || !strings.Contains(err.Error(), "the signing key (sdf backend) does not match the signing certificate") || !strings.Contains(err.Error(), "index= and key=sign|enc") {
		t.Errorf("mismatch: %v", err)
	}
	// The enc key offered as the signing key (swapped pair).
	err = accel.SelfTest(ctx, enc, signCert, accel.UseSign)
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("swapped pair: %v", err)
	}
}

func TestPoolExhaustedAndTimeout(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)
	// The timeout leaves room for opening the key (a self-test signature)
	// on a loaded machine; the device's latency is well beyond it.
	sign := openKey(t, c.ref(lib, 1, "sign", "sessions=1&timeout=1s"))
	ctl := loadLib(t, lib)
	if err := ctl.Control("latency_us", 2_500_000); err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := sign.Sign(rand.Reader, []byte("slow"), sm2.DefaultSM2SignerOpts)
		slow <- err
	}()
	// Wait until the slow call holds the only session.
	for deadline := time.Now().Add(5 * time.Second); ctl.Stats().CallsNow == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never reached the device")
		}
		time.Sleep(time.Millisecond)
	}
	_, err := sign.Sign(rand.Reader, []byte("queued"), sm2.DefaultSM2SignerOpts)
	if !errors.Is(err, sdf.ErrPoolExhausted) || !strings.Contains(err.Error(), "all 1 sessions on "+lib+" stayed busy; raise sessions=") {
		t.Errorf("second call: %v", err)
	}
	if accel.Result(err) != "pool_exhausted" {
		t.Errorf("result label %q", accel.Result(err))
	}
	err = <-slow
	if !errors.Is(err, sdf.ErrTimeout) || !strings.Contains(err.Error(), "did not answer within") || accel.Result(err) != "timeout" {
		t.Errorf("slow call: %v", err)
	}
	if err := ctl.Control("latency_us", 0); err != nil {
		t.Fatal(err)
	}
	// The session is served again once the slow call has returned.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := sign.Sign(rand.Reader, []byte("again"), sm2.DefaultSM2SignerOpts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key did not recover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := ctl.Stats().BusyViolations; v != 0 {
		t.Errorf("%d calls overlapped on one session", v)
	}
}

func TestDeviceFaults(t *testing.T) {
	lib, c, sign, encKey := cardServer(t, "sessions=2&lock-thread=true")
	enc := encKey.(crypto.Decrypter)
	ctl := loadLib(t, lib)
	msg := []byte("fault")
	signOK := func() error {
		sig, err := sign.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
		if err == nil && !sm2.VerifyASN1WithSM2(&c.sign[1].PublicKey, nil, msg, sig) {
			t.Fatal("signature does not verify")
		}
		return err
	}

	t.Run("transient link failure is retried on a new session", func(t *testing.T) {
		before := ctl.Stats()
		ctl.Control("fail_code", 0x01000003)
		ctl.Control("fail_next", 1)
		if err := signOK(); err != nil {
			t.Fatal(err)
		}
		after := ctl.Stats()
		if after.Faults != before.Faults+1 || after.SessionsOpened <= before.SessionsOpened {
			t.Errorf("faults %d→%d, sessions opened %d→%d", before.Faults, after.Faults, before.SessionsOpened, after.SessionsOpened)
		}
	})
	t.Run("operation error fails that call only", func(t *testing.T) {
		ctl.Control("fail_code", 0x0100000D) // SDR_SIGNERR
		ctl.Control("fail_next", 1)
		err := signOK()
		if err == nil || !strings.Contains(err.Error(), "SDF_InternalSign_ECC returned SDR_SIGNERR") || accel.Result(err) != "device_error" {
			t.Fatalf("got %v", err)
		}
		if err := signOK(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("decryption failure reveals nothing", func(t *testing.T) {
		ctl.Control("fail_code", 0x01000016) // SDR_ENCDATAERR
		ctl.Control("fail_next", 1)
		ct, _ := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, make([]byte, 48))
		if _, err := enc.Decrypt(rand.Reader, ct, nil); err != sdf.ErrDecryption {
			t.Fatalf("got %v", err)
		}
		if pt, err := enc.Decrypt(rand.Reader, ct, nil); err != nil || len(pt) != 48 {
			t.Fatal(err)
		}
	})
	t.Run("device reset", func(t *testing.T) {
		ctl.Control("reset", 1)
		if err := signOK(); err != nil {
			t.Fatalf("after a reset: %v", err)
		}
	})
	t.Run("device down and back", func(t *testing.T) {
		opens := ctl.Stats().DeviceOpens
		ctl.Control("down", 1)
		err := signOK()
		if err == nil || !strings.Contains(err.Error(), "SDR_COMMFAIL") || accel.Result(err) != "device_error" {
			t.Fatalf("while down: %v", err)
		}
		ct, _ := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, make([]byte, 48))
		if _, err := enc.Decrypt(rand.Reader, ct, nil); err == nil || errors.Is(err, sdf.ErrDecryption) {
			t.Fatalf("decrypt while down: %v, want the device error", err)
		}
		ctl.Control("down", 0)
		recovered(t, signOK)
		if got := ctl.Stats().DeviceOpens; got <= opens {
			t.Errorf("the device was not reopened (%d opens)", got)
		}
		if pt, err := enc.Decrypt(rand.Reader, ct, nil); err != nil || len(pt) != 48 {
			t.Fatalf("decrypt after recovery: %v", err)
		}
	})
}

// TestReplacedKeyIsRefused: a device that, after a reset, holds other keys
// at the index than those opened and checked against their certificates
// (a card reinitialised, a failover to an HSM with other keys) is refused
// with an error that says so, for signing and for decryption, instead of
// making signatures that do not verify; with the keys back, both work
// again.
func TestReplacedKeyIsRefused(t *testing.T) {
	lib, c, sign, encKey := cardServer(t, "sessions=2")
	enc := encKey.(crypto.Decrypter)
	ctl := loadLib(t, lib)
	msg := []byte("replaced")
	ct, err := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, make([]byte, 48))
	if err != nil {
		t.Fatal(err)
	}

	softsdf.GenerateKey(t, c.dir, "sign-1", testPIN)
	softsdf.GenerateKey(t, c.dir, "enc-1", testPIN)
	ctl.Control("reset", 1)
	_, err = sign.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err == nil || !strings.Contains(err.Error(), "now holds another sign key at index 1") || !strings.Contains(err.Error(), "put the key back") {
		t.Fatalf("sign with the key replaced: %v", err)
	}
	_, err = enc.Decrypt(rand.Reader, ct, nil)
	if err == nil || errors.Is(err, sdf.ErrDecryption) || !strings.Contains(err.Error(), "now holds another") {
		t.Fatalf("decrypt with the key replaced: %v, want the replaced key named", err)
	}

	softsdf.WriteKey(t, c.dir, "sign-1", c.sign[1], testPIN)
	softsdf.WriteKey(t, c.dir, "enc-1", c.enc[1], testPIN)
	sig, err := sign.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil || !sm2.VerifyASN1WithSM2(&c.sign[1].PublicKey, nil, msg, sig) {
		t.Fatalf("sign with the key back: %v", err)
	}
	if pt, err := enc.Decrypt(rand.Reader, ct, nil); err != nil || len(pt) != 48 {
		t.Fatalf("decrypt with the key back: %v", err)
	}
}

// recovered retries op until it succeeds (the backend waits a little
// between attempts to reopen a failed device), failing after 5 seconds.
func recovered(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend did not recover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConcurrentUseOfFourSessions(t *testing.T) {
	lib, c, sign, encKey := cardServer(t, "sessions=4")
	enc := encKey.(crypto.Decrypter)
	ctl := loadLib(t, lib)
	ctl.Control("latency_us", 2000)
	defer ctl.Control("latency_us", 0)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := bytes.Repeat([]byte{byte(i)}, 48)
			if i%2 == 0 {
				sig, err := sign.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
				if err == nil && !sm2.VerifyASN1WithSM2(&c.sign[1].PublicKey, nil, msg, sig) {
					err = errors.New("signature does not verify")
				}
				errs <- err
				return
			}
			ct, _ := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, msg)
			pt, err := enc.Decrypt(rand.Reader, ct, nil)
			if err == nil && !bytes.Equal(pt, msg) {
				err = errors.New("wrong plaintext")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := ctl.Stats()
	if s.BusyViolations != 0 || s.SessionsOpenMax > 4 || s.CallsMax > 4 || s.CallsMax < 2 {
		t.Errorf("sessions open at most %d, calls at once at most %d, overlapping calls on one session %d", s.SessionsOpenMax, s.CallsMax, s.BusyViolations)
	}
}

func TestClosedKey(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)
	k, err := accel.Open(context.Background(), c.ref(lib, 1, "sign", ""))
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	k.Close()
	if _, err := k.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts); !errors.Is(err, sdf.ErrClosed) {
		t.Errorf("sign after close: %v", err)
	}
	if s := loadLib(t, lib).Stats(); s.SessionsOpen != 0 {
		t.Errorf("%d sessions still open after the last key closed", s.SessionsOpen)
	}
	// The device can be opened again.
	openKey(t, c.ref(lib, 1, "sign", ""))
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := osWriteFile(path, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

// recorder is an accel.Observer that keeps what it was told.
type recorder struct {
	mu        sync.Mutex
	ops       map[string]int // backend/op/result
	waits     int
	inUse     int
	maxInUse  int
	negInUse  bool
	latencies []time.Duration
}

func (r *recorder) Op(backend, op string, err error, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[backend+"/"+op+"/"+accel.Result(err)]++
	r.latencies = append(r.latencies, d)
}

func (r *recorder) PoolWait(backend string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits++
}

func (r *recorder) PoolInUse(backend string, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inUse += delta
	r.maxInUse = max(r.maxInUse, r.inUse)
	r.negInUse = r.negInUse || r.inUse < 0
}

func TestObserver(t *testing.T) {
	_, c, sign, encKey := cardServer(t, "sessions=2")
	enc := encKey.(crypto.Decrypter)
	rec := &recorder{ops: map[string]int{}}
	accel.SetObserver(rec)
	defer accel.SetObserver(nil)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sign.Sign(rand.Reader, []byte("observed"), sm2.DefaultSM2SignerOpts)
		}()
	}
	wg.Wait()
	ct, _ := sm2.EncryptASN1(rand.Reader, &c.enc[1].PublicKey, make([]byte, 48))
	enc.Decrypt(rand.Reader, ct, nil)
	ct[len(ct)-1] ^= 1
	enc.Decrypt(rand.Reader, ct, nil)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string]int{"sdf/sign/ok": 8, "sdf/decrypt/ok": 1, "sdf/decrypt/error": 1}
	for k, n := range want {
		if rec.ops[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, rec.ops[k], n, rec.ops)
		}
	}
	if rec.waits != 10 || rec.inUse != 0 || rec.negInUse || rec.maxInUse < 1 || rec.maxInUse > 2 {
		t.Errorf("pool waits %d, in use %d at the end and %d at most (went negative: %v)", rec.waits, rec.inUse, rec.maxInUse, rec.negInUse)
	}
	for _, d := range rec.latencies {
		if d <= 0 {
			t.Errorf("latency %v", d)
		}
	}
}

// TestSoftSDFIsStrict checks the test device itself: it must refuse what a
// card refuses, or the other tests would not catch the backend misusing
// one.
func TestSoftSDFIsStrict(t *testing.T) {
	lib := library(t)
	newCard(t, 1)
	ctl := loadLib(t, lib)
	p, err := ctl.Probe(1, []byte(testPIN))
	if err != nil {
		t.Fatal(err)
	}
	want := softsdf.Probe{
		SecondOpenDevice: 0x01000005, // SDR_OPENDEVICE
		UnknownSession:   0x01000006, // SDR_OPENSESSION
		ShortDigest:      0x0100001D, // SDR_INARGERR
		NoAccessRight:    0x01000007, // SDR_PARDENY
		BusySession:      0x01000010, // SDR_STEPERR
		WrongPIN:         0x01000018, // SDR_PRKRERR
		IndexZero:        0x01000008, // SDR_KEYNOTEXIST
		BusyCallItself:   0,
	}
	if p != want {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
	if v := ctl.Stats().BusyViolations; v != 1 {
		t.Errorf("%d overlapping calls counted, want 1", v)
	}
}

func TestFaultsFromEnvironment(t *testing.T) {
	lib := library(t)
	c := newCard(t, 1)
	t.Setenv("SOFTSDF_FAIL_EVERY", "3")
	t.Setenv("SOFTSDF_FAIL_CODE", "0x0100000D") // SDR_SIGNERR
	// The self-test signature at open is the device's first private-key
	// call; the next nine are calls 2 to 10, of which 3, 6 and 9 fail.
	sign := openKey(t, c.ref(lib, 1, "sign", ""))
	failed := 0
	for range 9 {
		if _, err := sign.Sign(rand.Reader, []byte("x"), sm2.DefaultSM2SignerOpts); err != nil {
			if !strings.Contains(err.Error(), "SDR_SIGNERR") {
				t.Fatal(err)
			}
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d of 9 calls failed, want 3", failed)
	}
}

package tlcp

import (
	"bytes"
	"crypto/hmac"
	"fmt"
	"hash"
	"reflect"
	"testing"

	"github.com/emmansun/gmsm/sm3"
)

func TestPRFHashMatchesHMAC(t *testing.T) {
	h := newHMACSM3(nil)
	for _, keyLen := range []int{0, 1, 32, 48, 63, 64, 65, 200} {
		key := bytes.Repeat([]byte{byte(keyLen)}, keyLen)
		h.setKey(key)
		ref := hmac.New(sm3.New, key)
		for _, n := range []int{0, 1, 55, 56, 64, 100, 1000} {
			msg := bytes.Repeat([]byte{'m'}, n)
			for round := 0; round < 2; round++ { // reuse after Reset
				h.Reset()
				h.Write(msg)
				ref.Reset()
				ref.Write(msg)
				if got, want := h.Sum(nil), ref.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("key %d msg %d: %x, want %x", keyLen, n, got, want)
				}
			}
		}
	}
}

func BenchmarkPRFKeySchedule(b *testing.B) {
	pms := make([]byte, 48)
	random := make([]byte, 32)
	th := sm3.New()
	suite := cipherSuiteByID(ECC_SM4_GCM_SM3)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		mac := getHandshakeMAC(nil)
		masterFromPreMaster(mac, pms, random, random)
		keyBlock(suite, mac, random, random)
		finishedData(mac, true, th)
		finishedData(mac, false, th)
		putHandshakeMAC(mac)
	}
}

// TestHMACWipe: a handshake's HMAC goes back to the pool holding nothing
// of its key or of what it computed.
func TestHMACWipe(t *testing.T) {
	h := newHMACSM3(bytes.Repeat([]byte{0xa5}, 48))
	prf(make([]byte, 40), h, labelKeyExpansion, []byte("server random"), []byte("client random"))
	th := sm3.New()
	th.Write([]byte("transcript"))
	finishedData(h, true, th)
	h.wipe()
	for name, b := range map[string][]byte{"states": h.states[:cap(h.states)], "sum": h.sum[:], "a": h.a[:], "block": h.block[:], "transcriptHash": h.transcriptHash[:], "pad": h.pad[:], "keyBlock": h.keyBlock[:]} {
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Errorf("%s is not cleared: %x", name, b)
		}
	}
	for name, d := range map[string]hash.Hash{"inner": h.inner, "outer": h.outer} {
		checkSM3Wiped(t, name, d)
	}
}

// checkSM3Wiped fails unless d is reset with a block buffer of zeros.
func checkSM3Wiped(t *testing.T, name string, d hash.Hash) {
	t.Helper()
	fresh, _ := sm3.New().(stateSaver).AppendBinary(nil)
	if st, _ := d.(stateSaver).AppendBinary(nil); !bytes.Equal(st, fresh) {
		t.Errorf("the %s SM3 state is not reset", name)
	}
	// The digest's block buffer, which a reset leaves as it was, held
	// the tail of the last input (an HMAC's intermediate value, the end
	// of a transcript).
	if x := reflect.ValueOf(d).Elem().FieldByName("x"); x.Kind() == reflect.Array {
		for i := range x.Len() {
			if x.Index(i).Uint() != 0 {
				t.Errorf("the %s SM3 block buffer keeps input at byte %d", name, i)
				break
			}
		}
	} else {
		t.Logf("the %s SM3 digest has no block buffer named x (%T); not checked", name, d)
	}
}

// TestTranscriptHashWipe: what a transcript's hash is wiped with before
// it goes back to the pool leaves nothing of the messages, whatever their
// length, and the hash then hashes the next transcript as a new one
// would. (A hash given to the pool is not looked at again here: the next
// handshake may have it.)
func TestTranscriptHashWipe(t *testing.T) {
	for _, n := range []int{0, 1, 55, 63, 64, 65, 127, 1000} {
		h := sm3.New()
		h.Write(bytes.Repeat([]byte{0xa5}, n))
		wipeSM3(h)
		checkSM3Wiped(t, fmt.Sprintf("transcript of %d bytes", n), h)
		h.Write([]byte("next transcript"))
		if got, want := h.Sum(nil), sm3.Sum([]byte("next transcript")); !bytes.Equal(got, want[:]) {
			t.Fatalf("after %d bytes: reused hash %x, want %x", n, got, want)
		}
	}
}

// TestKeyScheduleAllocations: a handshake's key schedule, with its HMAC
// taken from and given back to the pool, allocates the master secret
// only.
func TestKeyScheduleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector; .ci/run runs this test without it")
	}
	pms := make([]byte, 48)
	random := make([]byte, 32)
	th := sm3.New()
	suite := cipherSuiteByID(ECC_SM4_GCM_SM3)
	if n := testing.AllocsPerRun(50, func() {
		mac := getHandshakeMAC(nil)
		masterFromPreMaster(mac, pms, random, random)
		keyBlock(suite, mac, random, random)
		finishedData(mac, true, th)
		finishedData(mac, false, th)
		putHandshakeMAC(mac)
	}); n != 1 {
		t.Errorf("the key schedule makes %v allocations, want 1 (the master secret)", n)
	}
}

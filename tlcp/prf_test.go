package tlcp

import (
	"bytes"
	"crypto/hmac"
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
	th := make([]byte, 32)
	suite := cipherSuiteByID(ECC_SM4_GCM_SM3)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		mac := newHMACSM3(nil)
		masterFromPreMaster(mac, pms, random, random)
		keyBlock(suite, mac, random, random)
		finishedData(mac, true, th)
		finishedData(mac, false, th)
	}
}

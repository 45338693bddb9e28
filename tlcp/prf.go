package tlcp

import (
	"crypto/hmac"
	"encoding"
	"hash"
	"sync"

	"github.com/emmansun/gmsm/sm3"
)

const (
	masterSecretLength = 48
	finishedVerifyLen  = 12
)

var (
	labelMasterSecret   = []byte("master secret")
	labelKeyExpansion   = []byte("key expansion")
	labelClientFinished = []byte("client finished")
	labelServerFinished = []byte("server finished")
)

// hmacSM3 is HMAC-SM3 that can be re-keyed and reset without allocating:
// the keyed inner and outer SM3 states are saved once per key. One serves a
// whole handshake's key schedule (pre-master secret, then master secret),
// and is wiped and kept for the next handshake (getHandshakeMAC); one
// serves each CBC record direction's MAC.
type hmacSM3 struct {
	inner, outer           hash.Hash
	innerState, outerState []byte
	// states holds innerState and outerState, in statesBuf.
	states    []byte
	statesBuf [2 * sm3StateSize]byte
	sum       [sm3Size]byte
	// Scratch kept here so that it does not escape to the heap on every
	// call: a and block for P_hash, pad for setKey, transcriptHash for
	// finishedData, keyBlock for keyBlock.
	a, block, transcriptHash [sm3Size]byte
	pad                      [64]byte
	keyBlock                 [maxKeyBlockLen]byte
	// fallback is used if the SM3 implementation cannot save its state.
	fallback hash.Hash
}

// sm3StateSize is the size of a marshaled gmsm SM3 state.
const sm3StateSize = 108

func newHMACSM3(key []byte) *hmacSM3 {
	h := new(hmacSM3)
	h.init(key)
	return h
}

// init keys a zero hmacSM3 in place.
func (h *hmacSM3) init(key []byte) {
	h.prepare()
	h.setKey(key)
}

// prepare makes a zero hmacSM3 ready for setKey.
func (h *hmacSM3) prepare() {
	h.inner, h.outer = sm3.New(), sm3.New()
	h.states = h.statesBuf[:0]
}

type stateSaver interface {
	encoding.BinaryAppender
	encoding.BinaryUnmarshaler
}

func (h *hmacSM3) setKey(key []byte) {
	in, ok1 := h.inner.(stateSaver)
	out, ok2 := h.outer.(stateSaver)
	if !ok1 || !ok2 {
		h.fallback = hmac.New(sm3.New, key)
		return
	}
	pad := &h.pad
	if len(key) > len(pad) {
		s := sm3.Sum(key)
		key = s[:]
	}
	clear(pad[:])
	copy(pad[:], key)
	for i := range pad {
		pad[i] ^= 0x36
	}
	h.inner.Reset()
	h.inner.Write(pad[:])
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	h.outer.Reset()
	h.outer.Write(pad[:])
	clear(pad[:])
	buf, _ := in.AppendBinary(h.states[:0])
	n := len(buf)
	buf, _ = out.AppendBinary(buf)
	h.states = buf
	h.innerState, h.outerState = buf[:n:n], buf[n:]
}

func (h *hmacSM3) Reset() {
	if h.fallback != nil {
		h.fallback.Reset()
		return
	}
	h.inner.(stateSaver).UnmarshalBinary(h.innerState)
}

func (h *hmacSM3) Write(p []byte) (int, error) {
	if h.fallback != nil {
		return h.fallback.Write(p)
	}
	return h.inner.Write(p)
}

func (h *hmacSM3) Sum(b []byte) []byte {
	if h.fallback != nil {
		return h.fallback.Sum(b)
	}
	in := h.inner.Sum(h.sum[:0])
	h.outer.(stateSaver).UnmarshalBinary(h.outerState)
	h.outer.Write(in)
	return h.outer.Sum(b)
}

func (h *hmacSM3) Size() int      { return sm3Size }
func (h *hmacSM3) BlockSize() int { return 64 }

// handshakeMACs keeps the key schedule's HMAC-SM3 (its SM3 states and
// buffers) from one handshake for the next: see getHandshakeMAC.
var handshakeMACs sync.Pool

// getHandshakeMAC returns HMAC-SM3 keyed with key for one handshake's key
// schedule; putHandshakeMAC gives it back when the handshake is over.
// With a nil key it is returned unkeyed, for a caller that keys it before
// anything else (masterFromPreMaster with the pre-master secret): keying
// it with nothing first would hash two blocks for nothing.
func getHandshakeMAC(key []byte) *hmacSM3 {
	h, _ := handshakeMACs.Get().(*hmacSM3)
	if h == nil {
		h = new(hmacSM3)
		h.prepare()
	}
	if key != nil {
		h.setKey(key)
	}
	return h
}

// putHandshakeMAC wipes h and keeps it for the next handshake.
func putHandshakeMAC(h *hmacSM3) {
	if h == nil || h.fallback != nil {
		return
	}
	h.wipe()
	handshakeMACs.Put(h)
}

// emptySM3State is the saved state of an SM3 hash that has hashed
// nothing: its block buffer is all zeros.
var emptySM3State = sync.OnceValue(func() []byte {
	s, _ := sm3.New().(stateSaver).AppendBinary(nil)
	return s
})

// wipeSM3 resets d and clears its block buffer, which a Reset leaves
// holding the tail of its last input, without hashing a block.
func wipeSM3(d hash.Hash) {
	if s, ok := d.(stateSaver); !ok || s.UnmarshalBinary(emptySM3State()) != nil {
		// One byte and then the rest of a block of zeros go through
		// the buffer whole.
		var zeroBlock [64]byte
		d.Reset()
		d.Write(zeroBlock[:1])
		d.Write(zeroBlock[1:])
	}
	d.Reset()
}

// transcriptHashes keeps the SM3 hashes of handshake transcripts for
// the next handshake: see getTranscriptHash.
var transcriptHashes sync.Pool

// getTranscriptHash returns an SM3 hash for one handshake's transcript;
// putTranscriptHash gives it back when the handshake is over.
func getTranscriptHash() hash.Hash {
	if h, ok := transcriptHashes.Get().(hash.Hash); ok {
		return h
	}
	return sm3.New()
}

// putTranscriptHash wipes h and keeps it for the next handshake.
func putTranscriptHash(h hash.Hash) {
	if h == nil {
		return
	}
	wipeSM3(h)
	transcriptHashes.Put(h)
}

// wipe clears everything h holds of its key and of what it computed.
func (h *hmacSM3) wipe() {
	wipeSM3(h.inner)
	wipeSM3(h.outer)
	clear(h.states)
	clear(h.sum[:])
	clear(h.a[:])
	clear(h.block[:])
	clear(h.transcriptHash[:])
	clear(h.pad[:])
	clear(h.keyBlock[:])
}

// prf fills out with PRF(secret, label, seed1 || seed2), the TLS 1.2
// P_hash construction over HMAC-SM3, with mac keyed with the secret.
func prf(out []byte, mac *hmacSM3, label, seed1, seed2 []byte) {
	a, block := &mac.a, &mac.block
	// A(1) = HMAC(secret, label || seed)
	mac.Reset()
	mac.Write(label)
	mac.Write(seed1)
	mac.Write(seed2)
	mac.Sum(a[:0])
	for len(out) > 0 {
		mac.Reset()
		mac.Write(a[:])
		mac.Write(label)
		mac.Write(seed1)
		mac.Write(seed2)
		mac.Sum(block[:0])
		n := copy(out, block[:])
		out = out[n:]
		if len(out) == 0 {
			break
		}
		// A(i+1) = HMAC(secret, A(i))
		mac.Reset()
		mac.Write(a[:])
		mac.Sum(a[:0])
	}
	clear(block[:])
}

// masterFromPreMaster derives the 48-byte master secret and re-keys mac
// with it for the rest of the key schedule.
func masterFromPreMaster(mac *hmacSM3, preMasterSecret, clientRandom, serverRandom []byte) []byte {
	master := make([]byte, masterSecretLength)
	mac.setKey(preMasterSecret)
	prf(master, mac, labelMasterSecret, clientRandom, serverRandom)
	mac.setKey(master)
	return master
}

// maxKeyBlockLen is the longest key block of the suites (the CBC ones').
const maxKeyBlockLen = 2 * (sm3Size + sm4Key)

// keyBlock expands the master secret (mac is keyed with it) into the
// suite's keys, in mac's scratch; note the server random comes first
// here.
func keyBlock(suite *cipherSuite, mac *hmacSM3, clientRandom, serverRandom []byte) []byte {
	kb := mac.keyBlock[:suite.keyBlockLen()]
	prf(kb, mac, labelKeyExpansion, serverRandom, clientRandom)
	return kb
}

// finishedData computes verify_data over the transcript so far; mac is
// keyed with the master secret.
func finishedData(mac *hmacSM3, isClient bool, transcript hash.Hash) (out [finishedVerifyLen]byte) {
	label := labelServerFinished
	if isClient {
		label = labelClientFinished
	}
	prf(out[:], mac, label, transcript.Sum(mac.transcriptHash[:0]), nil)
	return out
}

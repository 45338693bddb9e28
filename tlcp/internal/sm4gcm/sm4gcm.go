// Package sm4gcm is SM4 in Galois/Counter Mode with a 12-byte nonce and a
// 16-byte tag (as RFC 8998 and GB/T 38636 use it), for TLCP's GCM records
// and the session store.
//
// On amd64 CPUs with AVX-512 (F, VL, BW), GFNI and VPCLMULQDQ the work is
// done in assembly: counter mode on 64 blocks at once (wide64_amd64.s,
// byte-sliced, so that SM4's linear transform costs no rotation) and on
// sixteen for the rest of a message (kernel_amd64.s), the S-box through
// GF2P8AFFINEINVQB by way of the field isomorphism package sm4cbc
// derives, and GHASH on four blocks per VPCLMULQDQ with sixteen blocks
// per reduction. Neither indexes memory with secret data, and the
// tag is compared in constant time. Everywhere else, or when
// internal/cpufeat's plan says otherwise (GMGATE_CPU_DISABLE), gmsm's
// SM4-GCM does the work.
package sm4gcm

//go:generate go run gen.go

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"sync"
	"unsafe"

	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/tlcp/internal/sm4cbc"
)

const (
	// NonceSize is the nonce length of the AEAD.
	NonceSize = 12
	// TagSize is the tag length of the AEAD.
	TagSize = 16
	// maxPlaintext is the most one nonce may encrypt: 2^32-2 blocks.
	maxPlaintext = (1<<32 - 2) * 16
)

// KeySizeError is returned for keys that are not 16 bytes long.
type KeySizeError int

func (k KeySizeError) Error() string {
	return "sm4gcm: invalid key size " + strconv.Itoa(int(k))
}

var (
	errOpen     = errors.New("cipher: message authentication failed")
	errNoKernel = errors.New("sm4gcm: this kernel does not run on this CPU or build")
)

// New returns SM4-GCM for a 16-byte key, with the implementation
// internal/cpufeat chose for this CPU.
func New(key []byte) (cipher.AEAD, error) {
	return NewKernel(key, cpufeat.Current().GCM)
}

// NewKernel returns SM4-GCM that runs the given kernel. A kernel this
// build or CPU cannot run is an error.
func NewKernel(key []byte, k cpufeat.GCMKernel) (cipher.AEAD, error) {
	if len(key) != 16 {
		return nil, KeySizeError(len(key))
	}
	switch k {
	case cpufeat.GCMGmsm:
		block, err := sm4.NewCipher(key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(block)
	case cpufeat.GCMWideGFNI:
		if !haveKernel {
			return nil, errNoKernel
		}
		return newWide(key), nil
	}
	return nil, errNoKernel
}

// kernelKey is what kernel_amd64.s reads; its layout is fixed there.
type kernelKey struct {
	rk      [36]uint32   // the vector round keys; 33 used
	in      uint64       // into the state's image
	out     uint64       // back
	round   [4]uint64    // B_0..B_3
	inc     [16]uint32   // the counter of each lane in a batch
	bswap32 [16]byte     // PSHUFB: reverse each 32-bit word
	bswap   [16]byte     // PSHUFB: reverse the 16 bytes
	poly    [16]byte     // GHASH's reduction constant
	sixteen uint32       // the counter step per batch
	_       [3]uint32    // padding
	hpow    [16][16]byte // H^16·x … H^1·x, byte-reflected
	// What ctrBlocks64 reads besides.
	rkb  [33][4]uint32 // byte b of round key j, repeated four times
	iota [64]byte      // the block of each byte of a byte-sliced register
	ones [64]byte
}

// batch is what one call of ctrBlocks encrypts: sixteen blocks.
const batch = 256

// wide is SM4-GCM through kernel_amd64.s.
type wide struct {
	k  kernelKey
	in uint64 // the matrix into the state's image, for nonces
	// powers fills k.hpow[:15] (H^16·x … H^2·x) the first time a message
	// has sixteen blocks to hash: a key that only ever protects short
	// records (a handshake's Finished, most session store values) never
	// needs them. k.hpow[15] is set with the key.
	powers sync.Once
	// byteKeys fills k.rkb, which only ctrBlocks64 reads, the first time
	// a message is long enough for it (image).
	byteKeys sync.Once
}

// keyTemplate is a kernelKey with everything but the key's own parts
// (round keys and powers of H) set, derived once and copied into each
// new key.
var keyTemplate = sync.OnceValue(func() *kernelKey {
	m := sm4cbc.VectorMatrices()
	k := new(kernelKey)
	k.in, k.out, k.round = m.In, m.Out, m.Round
	for i := range k.iota {
		k.iota[i] = byte(4*(i%16) + i/16)
		k.ones[i] = 1
	}
	for l := range k.inc {
		k.inc[l] = uint32(4*(l%4) + l/4)
	}
	for i := range k.bswap32 {
		k.bswap32[i] = byte(i&^3 + 3 - i&3)
		k.bswap[i] = byte(15 - i)
	}
	binary.LittleEndian.PutUint64(k.poly[:8], 1)
	binary.LittleEndian.PutUint64(k.poly[8:], 0xc2<<56)
	k.sixteen = 16
	return k
})

func newWide(key []byte) *wide {
	g := &wide{k: *keyTemplate()}
	g.in = g.k.in
	rk := sm4cbc.VectorRoundKeysGFNI(key)
	copy(g.k.rk[:], rk[:])
	clear(rk[:])

	// H = E(0): the block of counter 0 under the zero nonce.
	var z [batch]byte
	var zn [NonceSize]byte
	ctrBlocks(&g.k, &zn, 0, &z[0], &z[0], 1)
	// Byte-reflected, then times x.
	lo, hi := binary.BigEndian.Uint64(z[8:16]), binary.BigEndian.Uint64(z[:8])
	clear(z[:])
	carry := -(hi >> 63)
	hi = hi<<1 | lo>>63
	lo <<= 1
	hi ^= carry & (0xc2 << 56)
	lo ^= carry & 1
	binary.LittleEndian.PutUint64(g.k.hpow[15][:8], lo)
	binary.LittleEndian.PutUint64(g.k.hpow[15][8:], hi)
	return g
}

// fillByteKeys sets k.rkb from k.rk.
func (g *wide) fillByteKeys() {
	for j, k := range g.k.rk[:33] {
		for b := range g.k.rkb[j] {
			g.k.rkb[j][b] = uint32(byte(k>>(8*b))) * 0x01010101
		}
	}
}

// fillPowers sets k.hpow[:15] from k.hpow[15] = H·x.
func (g *wide) fillPowers() {
	h := g.k.hpow[15]
	p := h
	for k := 2; k <= 16; k++ {
		mulField(&g.k.poly, &p, &h)
		g.k.hpow[16-k] = p
	}
	clear(h[:])
	clear(p[:])
}

func (g *wide) NonceSize() int { return NonceSize }
func (g *wide) Overhead() int  { return TagSize }

// stream is the keystream of one message.
type stream struct {
	nonce *[NonceSize]byte
	// img is the nonce in the state's image, for ctrBlocks64; wide is
	// whether it is set.
	img  [NonceSize]uint32
	wide bool
	// buf starts with the keystream of counters 1 to 16 or 1 to 64: the
	// tag mask E(J0), then first bytes for the message. It is the
	// scratch of a message's last blocks after that.
	buf   [4 * batch]byte
	first int
	mask  [TagSize]byte
}

// begin starts the keystream of a message of n bytes: 64 blocks at once
// when the message needs more than two batches of sixteen.
func (g *wide) begin(s *stream, nonce *[NonceSize]byte, n int) {
	s.nonce = nonce
	if n > 2*batch-16 {
		g.image(s)
		ctrBlocks64(&g.k, &s.img, 1, &s.buf[0], &s.buf[0], 1)
		s.first = 4*batch - 16
	} else {
		ctrBlocks(&g.k, nonce, 1, &s.buf[0], &s.buf[0], 1)
		s.first = batch - 16
	}
	copy(s.mask[:], s.buf[:TagSize])
}

// image sets s.img from the nonce (public data), and the byte round keys
// if they are not set yet: it comes before every use of ctrBlocks64.
func (g *wide) image(s *stream) {
	g.byteKeys.Do(g.fillByteKeys)
	for i, b := range s.nonce {
		s.img[i] = uint32(applyMatrix(g.in, b)) * 0x01010101
	}
	s.wide = true
}

// crypt XORs the keystream into src, writing dst, and clears s.
func (g *wide) crypt(dst, src []byte, s *stream) {
	m := min(len(src), s.first)
	subtle.XORBytes(dst[:m], src[:m], s.buf[16:16+m])
	dst, src = dst[m:], src[m:]
	ctr := uint32(2 + s.first/16)
	if n := len(src) / (4 * batch); n > 0 {
		if !s.wide {
			g.image(s)
		}
		ctrBlocks64(&g.k, &s.img, ctr, &dst[0], &src[0], n)
		ctr += uint32(64 * n)
		dst, src = dst[4*n*batch:], src[4*n*batch:]
	}
	switch r := len(src); {
	case r > 2*batch:
		// The rest in one batch of 64 blocks.
		if !s.wide {
			g.image(s)
		}
		copy(s.buf[:], src)
		ctrBlocks64(&g.k, &s.img, ctr, &s.buf[0], &s.buf[0], 1)
		copy(dst, s.buf[:r])
	case r > 0:
		if n := r / batch; n > 0 {
			ctrBlocks(&g.k, s.nonce, ctr, &dst[0], &src[0], n)
			ctr += uint32(16 * n)
			dst, src = dst[n*batch:], src[n*batch:]
		}
		if len(src) > 0 {
			copy(s.buf[:], src)
			ctrBlocks(&g.k, s.nonce, ctr, &s.buf[0], &s.buf[0], 1)
			copy(dst, s.buf[:len(src)])
		}
	}
	clear(s.buf[:])
}

// ghash adds b, zero-padded to whole blocks, to acc.
func (g *wide) ghash(acc *[16]byte, b []byte) {
	if n := len(b) / 16; n > 0 {
		if n >= 16 {
			g.powers.Do(g.fillPowers)
		}
		ghashBlocks(&g.k, acc, &b[0], n)
	}
	if r := len(b) % 16; r > 0 {
		var blk [16]byte
		copy(blk[:], b[len(b)-r:])
		ghashBlocks(&g.k, acc, &blk[0], 1)
	}
}

// tag computes the tag of ad and ct into out.
func (g *wide) tag(out *[TagSize]byte, ad, ct []byte, mask *[TagSize]byte) {
	var acc [16]byte
	g.ghash(&acc, ad)
	g.ghash(&acc, ct)
	var lens [16]byte
	binary.BigEndian.PutUint64(lens[:8], uint64(len(ad))*8)
	binary.BigEndian.PutUint64(lens[8:], uint64(len(ct))*8)
	ghashBlocks(&g.k, &acc, &lens[0], 1)
	for i := range out {
		out[i] = acc[15-i] ^ mask[i]
	}
}

func (g *wide) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != NonceSize {
		panic("sm4gcm: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) > maxPlaintext {
		panic("sm4gcm: message too large for GCM")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+TagSize)
	if inexactOverlap(out, plaintext) {
		panic("sm4gcm: invalid buffer overlap")
	}
	var st stream
	g.begin(&st, (*[NonceSize]byte)(nonce), len(plaintext))
	ct := out[:len(plaintext)]
	g.crypt(ct, plaintext, &st)
	var t [TagSize]byte
	g.tag(&t, additionalData, ct, &st.mask)
	copy(out[len(plaintext):], t[:])
	clear(st.mask[:])
	return ret
}

func (g *wide) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != NonceSize {
		panic("sm4gcm: incorrect nonce length given to GCM")
	}
	if len(ciphertext) < TagSize || uint64(len(ciphertext)) > maxPlaintext+TagSize {
		return nil, errOpen
	}
	tag := ciphertext[len(ciphertext)-TagSize:]
	ciphertext = ciphertext[:len(ciphertext)-TagSize]
	ret, out := sliceForAppend(dst, len(ciphertext))
	if inexactOverlap(out, ciphertext) {
		panic("sm4gcm: invalid buffer overlap")
	}
	var st stream
	g.begin(&st, (*[NonceSize]byte)(nonce), len(ciphertext))
	var want [TagSize]byte
	g.tag(&want, additionalData, ciphertext, &st.mask)
	clear(st.mask[:])
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(st.buf[:])
		return nil, errOpen
	}
	g.crypt(out, ciphertext, &st)
	return ret, nil
}

// applyMatrix applies a GF2P8AFFINEQB matrix to a byte (public data
// only: it branches on nothing but does not hide its input either).
func applyMatrix(m uint64, x byte) byte {
	var out byte
	for i := 0; i < 8; i++ {
		row := byte(m >> (8 * (7 - i)))
		out |= byte(bits.OnesCount8(row&x)&1) << i
	}
	return out
}

// sliceForAppend extends in by n bytes, returning the whole slice and the
// n new bytes.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}

// inexactOverlap reports whether x and y share memory other than at the
// same start: in-place use is allowed, a shifted overlap is not.
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	x0, x1 := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&x[len(x)-1]))
	y0, y1 := uintptr(unsafe.Pointer(&y[0])), uintptr(unsafe.Pointer(&y[len(y)-1]))
	return x0 <= y1 && y0 <= x1
}

// KernelOf reports which kernel an AEAD from this package runs.
func KernelOf(a cipher.AEAD) cpufeat.GCMKernel {
	if _, ok := a.(*wide); ok {
		return cpufeat.GCMWideGFNI
	}
	return cpufeat.GCMGmsm
}

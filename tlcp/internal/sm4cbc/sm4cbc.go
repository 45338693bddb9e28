// Package sm4cbc encrypts with SM4 in CBC mode, for the CBC record
// protection of package tlcp.
//
// CBC encryption is serial within a chain: each block waits for the
// previous one, so the time of one block decides the speed. On CPUs with
// GFNI and AVX-512 (kernel_amd64.s) one block's round function is one
// affine inversion per byte offset of SM4's linear transform, and each of
// the four 32-bit lanes of a vector register carries a different chain:
// up to four chains (four TLCP records, each with its own IV) cost the
// time of one. With AES-NI and AVX but no GFNI (aesni_amd64.s, Hygon and
// most x86 servers) the same state and lanes run with AESENCLAST doing the
// inversion and PSHUFB the affine maps. On arm64, and on x86 without AVX2
// (blocks.go), the next block of each of four chains goes through one
// call of gmsm's multi-block code, which computes the S-box with the AES or
// SM4 instructions. None of these indexes a table with secret data.
// Elsewhere (loong64, CPUs without AES, the purego build tag) blocks go
// one at a time through gmsm's SM4, whose single-block code is
// table-driven unless internal/cpufeat switched it to the AES
// instructions. internal/cpufeat decides which kernel runs.
//
// Decryption is not here: CBC decryption is parallel within a chain and
// gmsm's multi-block code does it well.
package sm4cbc

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"strconv"
	"unsafe"

	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/cpufeat"
)

// BlockSize is the SM4 block size.
const BlockSize = 16

// Encrypter encrypts CBC chains under one key. It is not safe for
// concurrent use.
type Encrypter struct {
	block  cipher.Block
	kernel cpufeat.CBCKernel
	lanes  *laneState
	aesni  *aesniLanes
	blocks *blockLanes
}

// laneState is the key and the scratch of the vector code.
type laneState struct {
	key laneKey
	// ptr and step are each lane's position and advance per block. An
	// idle lane encrypts idleChain over and over without storing (step
	// 0), which costs no time since the lanes run together; its loads do
	// not wait for stores, as they would if it worked in place.
	ptr  [lanes]*byte
	step [lanes]uintptr
}

// idleChain is what idle lanes read: an IV and one block. It is never
// written.
var idleChain [2 * BlockSize]byte

// lanes is the number of chains the vector code runs at once.
const lanes = 4

// laneKey is what the vector code reads; its layout is fixed by
// kernel_amd64.s.
type laneKey struct {
	rk    [33][lanes]uint32 // round keys (vectorRoundKeys), one copy per lane
	in    [2]uint64         // tables.in, in both quadwords
	out   [2]uint64         // tables.out
	round [4][2]uint64      // tables.round
}

// KeySizeError is returned for keys that are not 16 bytes long.
type KeySizeError int

func (k KeySizeError) Error() string {
	return "sm4cbc: invalid key size " + strconv.Itoa(int(k))
}

// New returns an Encrypter for a 16-byte key, with the kernel
// internal/cpufeat chose for this CPU.
func New(key []byte) (*Encrypter, error) {
	return NewKernel(key, cpufeat.Current().CBC)
}

// NewKernel returns an Encrypter that runs the given kernel (the one a
// cpufeat.Plan names). A kernel this build or CPU cannot run is an error.
func NewKernel(key []byte, k cpufeat.CBCKernel) (*Encrypter, error) {
	if len(key) != 16 {
		return nil, KeySizeError(len(key))
	}
	e := &Encrypter{kernel: k}
	switch k {
	case cpufeat.CBCSerial:
		// gmsm's block, for encryptSerial: the other kernels schedule
		// the key themselves.
		block, err := sm4.NewCipher(key)
		if err != nil {
			return nil, err
		}
		e.block = block
	case cpufeat.CBCLanesGFNI:
		if !haveLanes {
			return nil, errNoKernel
		}
		e.lanes = newLaneState(key)
	case cpufeat.CBCLanesAESNI:
		if !haveAESNI {
			return nil, errNoKernel
		}
		e.aesni = &aesniLanes{key: newAESNIKey(key)}
	case cpufeat.CBCLanesBlocks:
		if !haveBlocks {
			return nil, errNoKernel
		}
		block, err := sm4.NewCipher(key)
		if err != nil {
			return nil, err
		}
		e.blocks = newBlockLanes(block)
	default:
		return nil, errNoKernel
	}
	return e, nil
}

var errNoKernel = errors.New("sm4cbc: this kernel does not run on this CPU or build")

// Kernel is the kernel e runs.
func (e *Encrypter) Kernel() cpufeat.CBCKernel { return e.kernel }

func newLaneState(key []byte) *laneState {
	s := new(laneState)
	vrk := vectorRoundKeysGFNI(key)
	for i, k := range vrk {
		for l := range s.key.rk[i] {
			s.key.rk[i][l] = k
		}
	}
	s.key.in = [2]uint64{tables.in.qword(), tables.in.qword()}
	s.key.out = [2]uint64{tables.out.qword(), tables.out.qword()}
	for o, m := range tables.round {
		s.key.round[o] = [2]uint64{m.qword(), m.qword()}
	}
	return s
}

// Lanes is how many chains EncryptChains encrypts in the time of one.
func (e *Encrypter) Lanes() int {
	if e.lanes != nil || e.aesni != nil || e.blocks != nil {
		return lanes
	}
	return 1
}

// EncryptChains encrypts each chain in place. A chain is its IV (its first
// 16 bytes, left as they are) followed by the plaintext blocks; its length
// must be a multiple of 16 and at least 16.
func (e *Encrypter) EncryptChains(chains [][]byte) {
	for _, c := range chains {
		if len(c) < BlockSize || len(c)%BlockSize != 0 {
			panic("sm4cbc: chain is not an IV and whole blocks")
		}
	}
	if e.lanes != nil {
		e.lanes.encrypt(chains)
		return
	}
	if e.aesni != nil {
		e.aesni.encrypt(chains)
		return
	}
	if e.blocks != nil {
		e.blocks.encrypt(chains)
		return
	}
	for _, c := range chains {
		e.encryptSerial(c)
	}
}

// encryptSerial encrypts one chain a block at a time.
func (e *Encrypter) encryptSerial(c []byte) {
	prev := c[:BlockSize]
	for b := c[BlockSize:]; len(b) > 0; b = b[BlockSize:] {
		blk := b[:BlockSize]
		subtle.XORBytes(blk, blk, prev)
		e.block.Encrypt(blk, blk)
		prev = blk
	}
}

// encrypt runs the chains through the lanes, giving a lane the next chain
// as soon as its own ends.
func (s *laneState) encrypt(chains [][]byte) {
	var (
		cur  [lanes][]byte // the chain in each lane
		off  [lanes]int    // where its IV for the next call is
		next int
	)
	for {
		n := -1
		var store uint64
		for l := range cur {
			if off[l]+BlockSize >= len(cur[l]) {
				cur[l], off[l] = nil, 0
				for next < len(chains) && cur[l] == nil {
					if len(chains[next]) > BlockSize {
						cur[l] = chains[next]
					}
					next++
				}
			}
			if cur[l] == nil {
				s.ptr[l], s.step[l] = &idleChain[0], 0
				continue
			}
			s.ptr[l], s.step[l] = &cur[l][off[l]], BlockSize
			store |= 0xf << (16 * l)
			if left := (len(cur[l]) - off[l]) / BlockSize; n < 0 || left-1 < n {
				n = left - 1
			}
		}
		if n < 0 {
			break
		}
		encryptLanes(&s.key, &s.ptr, &s.step, store, n)
		for l := range cur {
			if cur[l] != nil {
				off[l] += n * BlockSize
			}
		}
	}
	// Do not keep the caller's buffers reachable.
	s.ptr = [lanes]*byte{}
}

// Ensure the layout kernel_amd64.s relies on.
var _ [528]struct{} = [unsafe.Offsetof(laneKey{}.in)]struct{}{}
var _ [624]struct{} = [unsafe.Sizeof(laneKey{})]struct{}{}

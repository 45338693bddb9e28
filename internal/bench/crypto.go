package bench

import (
	"bytes"
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	smcipher "github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/tlcp"
)

// CryptoSchema names the layout of CryptoReport in JSON.
const CryptoSchema = "gmgate.bench.crypto/v1"

// DefaultSizes are the message sizes of the by-size figures.
var DefaultSizes = []int{16, 64, 256, 1024, 4096, 16384}

// MaxMessageSize bounds the message sizes of the by-size figures, which
// must be whole SM4 blocks (multiples of 16 bytes).
const MaxMessageSize = 1 << 20

// DefaultCryptoDuration is the length of each timed loop when none is
// given.
const DefaultCryptoDuration = time.Second

// CryptoWarmup is the warm-up gmgate bench crypto runs before each timed
// loop of d when none is given: a fifth of it, at most 200ms.
func CryptoWarmup(d time.Duration) time.Duration { return min(d/5, 200*time.Millisecond) }

// Groups of crypto figures, in the order they are reported.
const (
	GroupPublicKey  = "public-key"
	GroupSM2PKE     = "sm2-pke"
	GroupThroughput = "throughput"
	GroupBackend    = "backend"
)

// CryptoOptions says what RunCrypto measures and how.
type CryptoOptions struct {
	// Duration is the length of each timed loop (DefaultCryptoDuration
	// when zero).
	Duration time.Duration
	// Warmup is run before each timed loop and not counted; zero is none
	// but the single operation that starts the calibration.
	Warmup time.Duration
	// Sizes are the message sizes for the by-size figures (default
	// DefaultSizes).
	Sizes []int
	// CPU is the CPU the measuring thread is pinned to; negative picks the
	// last CPU this process may use.
	CPU int
	// Only keeps the figures whose algorithm contains one of these words
	// (case-insensitive); empty keeps all.
	Only []string
	// Keys are accel key references (file:…, sdf:…) measured as backends,
	// besides an in-memory software key.
	Keys []string
	// Retries is how many times a figure taken while another process
	// shared the core is taken again (the cleanest attempt is kept).
	Retries int
	// Progress, when set, receives one line per figure as it is taken.
	Progress io.Writer
}

// CryptoReport is the outcome of RunCrypto.
type CryptoReport struct {
	Schema          string           `json:"schema"`
	Started         time.Time        `json:"started"`
	Machine         Machine          `json:"machine"`
	Implementations []Implementation `json:"gm_implementations"`
	// PinnedCPU is the CPU every figure was taken on.
	PinnedCPU int `json:"pinned_cpu"`
	// DurationSeconds is the length of each timed loop asked for.
	DurationSeconds float64 `json:"duration_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	// LoadAverage is the 1-minute load average before and after the run,
	// to judge how quiet the machine was.
	LoadAverage [2]float64     `json:"load_average"`
	Results     []CryptoResult `json:"results"`
	// Notes say which figures could not be taken and why.
	Notes []string `json:"notes,omitempty"`
}

// CryptoResult is one figure.
type CryptoResult struct {
	Group     string `json:"group"`
	Algorithm string `json:"algorithm"`
	Operation string `json:"operation"`
	// Size is the message size in bytes for by-size figures, else 0.
	Size int `json:"size"`
	// Backend is the accel backend and key reference for backend figures.
	Backend    string  `json:"backend,omitempty"`
	Iterations int64   `json:"iterations"`
	Seconds    float64 `json:"seconds"`
	NsPerOp    float64 `json:"ns_per_op"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	// MBPerSec is Size*OpsPerSec/1e6 for by-size figures, else 0.
	MBPerSec float64 `json:"mb_per_sec"`
	// CPUShare is the measuring thread's CPU time over wall time: below
	// about 0.95 the core was shared and the figure understates it.
	CPUShare float64 `json:"cpu_share"`
	// OthersBusy is the share of time the machine's other CPUs were busy
	// meanwhile (-1 when unknown): work there can slow this core too.
	OthersBusy float64 `json:"others_busy"`
}

// cryptoCase is one figure to take: setup prepares keys and buffers and
// returns the loop to time.
type cryptoCase struct {
	group, algorithm, operation string
	size                        int
	backend                     string
	setup                       func() (opLoop, error)
	// optional cases are left out, with a note, when one operation fails
	// (a card's key may not allow every operation).
	optional bool
}

// RunCrypto measures the GM primitives and their usual counterparts on one
// pinned core of this machine.
func RunCrypto(ctx context.Context, opts CryptoOptions) (*CryptoReport, error) {
	if opts.Duration < 0 || opts.Warmup < 0 {
		return nil, errors.New("durations cannot be negative")
	}
	if opts.Duration == 0 {
		opts.Duration = DefaultCryptoDuration
	}
	if len(opts.Sizes) == 0 {
		opts.Sizes = DefaultSizes
	}
	if opts.Retries < 0 {
		return nil, errors.New("retries cannot be negative")
	}
	for _, s := range opts.Sizes {
		if s <= 0 || s%16 != 0 || s > MaxMessageSize {
			return nil, fmt.Errorf("message size %d: sizes must be positive multiples of 16 up to 1 MiB (SM4-ECB and SM4-CBC work on whole blocks)", s)
		}
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	pin := opts.CPU
	if pin < 0 {
		pin = cpus[len(cpus)-1]
	} else if !slices.Contains(cpus, pin) {
		return nil, fmt.Errorf("CPU %d is not among the CPUs this process may use (%v)", pin, cpus)
	}

	cases, closers, err := cryptoCases(ctx, opts)
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	if err != nil {
		return nil, err
	}
	cases = filterCases(cases, opts.Only)
	if len(cases) == 0 {
		return nil, fmt.Errorf("no figure matches %q", strings.Join(opts.Only, ","))
	}

	rep := &CryptoReport{
		Schema:          CryptoSchema,
		Started:         time.Now().UTC().Truncate(time.Second),
		Machine:         DetectMachine(),
		Implementations: GMImplementations(),
		PinnedCPU:       pin,
		DurationSeconds: opts.Duration.Seconds(),
		WarmupSeconds:   opts.Warmup.Seconds(),
	}
	rep.LoadAverage[0] = loadAverage()

	unpin, err := pinThread(pin)
	if err != nil {
		return nil, err
	}
	defer unpin()
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		loop, err := c.setup()
		if err == nil && c.optional {
			if err = loop(1); err != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %s %s left out: %v", c.backend, c.algorithm, c.operation, err))
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", c.algorithm, c.operation, err)
		}
		// Another process taking the core shows as a low CPU share; such
		// a figure is taken again, and the cleanest attempt kept.
		// Busy neighbours can slow a core without taking it (shared caches,
		// a hypervisor's sibling threads), so how busy the other CPUs were
		// is kept beside each figure.
		var s Sample
		others := -1.0
		for attempt := 0; attempt <= opts.Retries; attempt++ {
			runtime.GC()
			before := readCPUTimes()
			try, err := measure(loop, opts.Duration, opts.Warmup)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", c.algorithm, c.operation, err)
			}
			if attempt == 0 || try.CPUShare() > s.CPUShare() {
				s = try
				others = othersBusy(before, readCPUTimes(), pin)
			}
			if s.CPUShare() == 0 || s.CPUShare() >= noisyShare || ctx.Err() != nil {
				break
			}
		}
		r := CryptoResult{
			Group: c.group, Algorithm: c.algorithm, Operation: c.operation, Size: c.size, Backend: c.backend,
			Iterations: s.Iterations, Seconds: s.Elapsed.Seconds(), NsPerOp: s.NsPerOp(), OpsPerSec: s.OpsPerSec(),
			CPUShare: s.CPUShare(), OthersBusy: others,
		}
		if c.size > 0 {
			r.MBPerSec = r.OpsPerSec * float64(c.size) / 1e6
		}
		rep.Results = append(rep.Results, r)
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "  %-12s %-22s %s\n", c.algorithm, c.label(), formatRate(r))
		}
	}
	rep.LoadAverage[1] = loadAverage()
	return rep, nil
}

func (c cryptoCase) label() string {
	if c.size > 0 {
		return fmt.Sprintf("%s %d B", c.operation, c.size)
	}
	return c.operation
}

func formatRate(r CryptoResult) string {
	if r.Size > 0 && r.Group == GroupThroughput {
		return fmt.Sprintf("%.1f MB/s", r.MBPerSec)
	}
	return fmt.Sprintf("%.0f ops/s", r.OpsPerSec)
}

func filterCases(cases []cryptoCase, only []string) []cryptoCase {
	if len(only) == 0 {
		return cases
	}
	var out []cryptoCase
	for _, c := range cases {
		name := strings.ToLower(c.algorithm)
		for _, w := range only {
			if w = strings.ToLower(strings.TrimSpace(w)); w != "" && strings.Contains(name, w) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// cryptoCases lists every figure. Keys are generated once; what a loop
// signs, encrypts or hashes is fixed so that only the operation is timed.
func cryptoCases(ctx context.Context, opts CryptoOptions) ([]cryptoCase, []func(), error) {
	var cases []cryptoCase
	add := func(group, alg, op string, size int, setup func() (opLoop, error)) {
		cases = append(cases, cryptoCase{group: group, algorithm: alg, operation: op, size: size, setup: setup})
	}

	sm2Key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	digest := sm3.Sum([]byte("gmgate bench"))

	// Public-key operations, one per loop iteration.
	add(GroupPublicKey, "SM2", "sign", 0, func() (opLoop, error) {
		return func(n int64) error {
			for range n {
				if _, err := sm2.SignASN1(rand.Reader, sm2Key, digest[:], nil); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	add(GroupPublicKey, "SM2", "verify", 0, func() (opLoop, error) {
		sig, err := sm2.SignASN1(rand.Reader, sm2Key, digest[:], nil)
		if err != nil {
			return nil, err
		}
		return func(n int64) error {
			for range n {
				if !sm2.VerifyASN1(&sm2Key.PublicKey, digest[:], sig) {
					return errors.New("signature does not verify")
				}
			}
			return nil
		}, nil
	})
	add(GroupPublicKey, "ECDSA-P256", "sign", 0, func() (opLoop, error) {
		return func(n int64) error {
			for range n {
				if _, err := ecdsa.SignASN1(rand.Reader, ecKey, digest[:]); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	add(GroupPublicKey, "ECDSA-P256", "verify", 0, func() (opLoop, error) {
		sig, err := ecdsa.SignASN1(rand.Reader, ecKey, digest[:])
		if err != nil {
			return nil, err
		}
		return func(n int64) error {
			for range n {
				if !ecdsa.VerifyASN1(&ecKey.PublicKey, digest[:], sig) {
					return errors.New("signature does not verify")
				}
			}
			return nil
		}, nil
	})
	var rsaKey *rsa.PrivateKey
	rsaSetup := func() (*rsa.PrivateKey, error) {
		if rsaKey == nil {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				return nil, err
			}
			rsaKey = k
		}
		return rsaKey, nil
	}
	add(GroupPublicKey, "RSA-2048", "sign", 0, func() (opLoop, error) {
		k, err := rsaSetup()
		if err != nil {
			return nil, err
		}
		return func(n int64) error {
			for range n {
				if _, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:]); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	add(GroupPublicKey, "RSA-2048", "verify", 0, func() (opLoop, error) {
		k, err := rsaSetup()
		if err != nil {
			return nil, err
		}
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		if err != nil {
			return nil, err
		}
		return func(n int64) error {
			for range n {
				if err := rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
	add(GroupPublicKey, "X25519", "key agreement", 0, func() (opLoop, error) {
		a, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		b, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return func(n int64) error {
			for range n {
				if _, err := a.ECDH(b.PublicKey()); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})

	// SM2 public-key encryption by message size.
	for _, size := range opts.Sizes {
		msg := bytes.Repeat([]byte{0x5a}, size)
		add(GroupSM2PKE, "SM2", "encrypt", size, func() (opLoop, error) {
			return func(n int64) error {
				for range n {
					if _, err := sm2.Encrypt(rand.Reader, &sm2Key.PublicKey, msg, sm2.ASN1EncrypterOpts); err != nil {
						return err
					}
				}
				return nil
			}, nil
		})
	}
	for _, size := range opts.Sizes {
		msg := bytes.Repeat([]byte{0x5a}, size)
		add(GroupSM2PKE, "SM2", "decrypt", size, func() (opLoop, error) {
			ct, err := sm2.Encrypt(rand.Reader, &sm2Key.PublicKey, msg, sm2.ASN1EncrypterOpts)
			if err != nil {
				return nil, err
			}
			return func(n int64) error {
				for range n {
					if _, err := sm2Key.Decrypt(nil, ct, nil); err != nil {
						return err
					}
				}
				return nil
			}, nil
		})
	}

	// Throughput by size.
	hashCase := func(alg string, newHash func() hash.Hash) {
		for _, size := range opts.Sizes {
			add(GroupThroughput, alg, "hash", size, func() (opLoop, error) {
				h := newHash()
				buf := make([]byte, size)
				sum := make([]byte, 0, h.Size())
				return func(n int64) error {
					for range n {
						h.Reset()
						h.Write(buf)
						sum = h.Sum(sum[:0])
					}
					return nil
				}, nil
			})
		}
	}
	hashCase("SM3", sm3.New)
	hashCase("SHA-256", sha256.New)

	sm4Block := func() (cipher.Block, error) { return sm4.NewCipher(make([]byte, 16)) }
	aesBlock := func() (cipher.Block, error) { return aes.NewCipher(make([]byte, 16)) }
	modeCase := func(alg, op string, newMode func() (cipher.BlockMode, error)) {
		for _, size := range opts.Sizes {
			add(GroupThroughput, alg, op, size, func() (opLoop, error) {
				m, err := newMode()
				if err != nil {
					return nil, err
				}
				buf := make([]byte, size)
				return func(n int64) error {
					for range n {
						m.CryptBlocks(buf, buf)
					}
					return nil
				}, nil
			})
		}
	}
	var iv [16]byte
	modeCase("SM4-ECB", "encrypt", func() (cipher.BlockMode, error) {
		b, err := sm4Block()
		if err != nil {
			return nil, err
		}
		return smcipher.NewECBEncrypter(b), nil
	})
	modeCase("SM4-CBC", "encrypt", func() (cipher.BlockMode, error) {
		b, err := sm4Block()
		if err != nil {
			return nil, err
		}
		return cipher.NewCBCEncrypter(b, iv[:]), nil
	})
	modeCase("SM4-CBC", "decrypt", func() (cipher.BlockMode, error) {
		b, err := sm4Block()
		if err != nil {
			return nil, err
		}
		return cipher.NewCBCDecrypter(b, iv[:]), nil
	})
	gcmCase := func(alg string, newAEAD func() (cipher.AEAD, error)) {
		for _, size := range opts.Sizes {
			add(GroupThroughput, alg, "seal", size, func() (opLoop, error) {
				aead, err := newAEAD()
				if err != nil {
					return nil, err
				}
				var nonce [12]byte
				var ad [13]byte // a TLS-style record header as additional data
				buf := make([]byte, size)
				out := make([]byte, 0, size+aead.Overhead())
				return func(n int64) error {
					for range n {
						out = aead.Seal(out[:0], nonce[:], buf, ad[:])
					}
					return nil
				}, nil
			})
		}
	}
	// SM4-GCM as the record layer seals: the kernel internal/cpufeat
	// chooses for this CPU (gmsm's GCM where gmgate has none of its own).
	gcmCase("SM4-GCM", func() (cipher.AEAD, error) { return tlcp.NewSM4GCM(make([]byte, 16)) })
	gcmCase("AES-128-GCM", func() (cipher.AEAD, error) {
		b, err := aesBlock()
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	})

	closers, err := backendCases(ctx, opts.Keys, sm2Key, &cases)
	return cases, closers, err
}

// backendCases adds the private-key operations TLCP asks of a server key,
// done through accel: an in-memory software key and each key reference
// given.
func backendCases(ctx context.Context, refs []string, soft *sm2.PrivateKey, cases *[]cryptoCase) ([]func(), error) {
	var closers []func()
	keys := []accel.Key{accel.NewSoftwareKey(soft)}
	names := []string{"software (in memory)"}
	for _, ref := range refs {
		k, err := accel.Open(ctx, ref)
		if err != nil {
			return closers, fmt.Errorf("opening key %s: %w", ref, err)
		}
		closers = append(closers, func() { _ = k.Close() })
		keys = append(keys, k)
		names = append(names, k.Backend()+" "+ref)
	}
	// What a TLCP server signs (ServerKeyExchange: two randoms and the
	// encryption certificate, about 600 bytes) and decrypts (the 48-byte
	// pre-master secret).
	signed := bytes.Repeat([]byte{0xa5}, 600)
	for i, k := range keys {
		name := names[i]
		pub, ok := k.Public().(*ecdsa.PublicKey)
		if !ok || !sm2.IsSM2PublicKey(pub) {
			return closers, fmt.Errorf("key %s is not an SM2 key (%T)", name, k.Public())
		}
		*cases = append(*cases, cryptoCase{group: GroupBackend, algorithm: "SM2", operation: "sign (TLCP)", backend: name, optional: true,
			setup: func() (opLoop, error) {
				return func(n int64) error {
					for range n {
						if _, err := k.Sign(rand.Reader, signed, sm2.DefaultSM2SignerOpts); err != nil {
							return err
						}
					}
					return nil
				}, nil
			}})
		dec, ok := k.(crypto.Decrypter)
		if !ok {
			continue
		}
		*cases = append(*cases, cryptoCase{group: GroupBackend, algorithm: "SM2", operation: "decrypt (TLCP, 48 B)", backend: name, optional: true,
			setup: func() (opLoop, error) {
				pms := make([]byte, 48)
				ct, err := sm2.Encrypt(rand.Reader, pub, pms, sm2.ASN1EncrypterOpts)
				if err != nil {
					return nil, err
				}
				return func(n int64) error {
					for range n {
						if _, err := dec.Decrypt(rand.Reader, ct, nil); err != nil {
							return err
						}
					}
					return nil
				}, nil
			}})
	}
	return closers, nil
}

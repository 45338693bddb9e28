package tlcp

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

// memPipe is an in-memory, buffered, full-duplex connection pair: the
// cheapest transport, so that benchmarks measure the protocol.
func memPipe() (net.Conn, net.Conn) {
	a2b, b2a := newMemQueue(), newMemQueue()
	return &memEnd{r: b2a, w: a2b}, &memEnd{r: a2b, w: b2a}
}

type memQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newMemQueue() *memQueue {
	q := &memQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

type memEnd struct{ r, w *memQueue }

func (e *memEnd) Read(b []byte) (int, error) {
	q := e.r
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 {
		if q.closed {
			return 0, io.EOF
		}
		q.cond.Wait()
	}
	n := copy(b, q.buf)
	q.buf = q.buf[n:]
	return n, nil
}

func (e *memEnd) Write(b []byte) (int, error) {
	q := e.w
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, io.ErrClosedPipe
	}
	q.buf = append(q.buf, b...)
	q.cond.Broadcast()
	return len(b), nil
}

func (e *memEnd) Close() error {
	for _, q := range []*memQueue{e.r, e.w} {
		q.mu.Lock()
		q.closed = true
		q.cond.Broadcast()
		q.mu.Unlock()
	}
	return nil
}

func (e *memEnd) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (e *memEnd) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (e *memEnd) SetDeadline(time.Time) error      { return nil }
func (e *memEnd) SetReadDeadline(time.Time) error  { return nil }
func (e *memEnd) SetWriteDeadline(time.Time) error { return nil }

func benchHandshake(b *testing.B, ccfg, scfg *Config, resume bool) {
	b.Helper()
	// The server side runs in one long-lived goroutine, as in a server
	// that hands handshakes to a pool of workers.
	w := newServerWorker()
	defer w.stop()
	if resume {
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4, 0)
		w.runHandshake(b, ccfg, scfg) // prime the caches
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		if resumed := w.runHandshake(b, ccfg, scfg); resumed != resume {
			b.Fatalf("resumed=%v, want %v", resumed, resume)
		}
	}
	cpu.report(b)
}

// cpuClock reports process CPU time per operation next to wall time: on a
// shared machine it is the steadier of the two.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// reportBytes reports the throughput per second of process CPU time (per
// core), for operations of size bytes each.
func (c cpuClock) reportBytes(b *testing.B, size int) {
	cpu := processCPU() - c.start
	if cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverWorker runs the server handshakes handed to it.
type serverWorker struct {
	conns chan *Conn
	errs  chan error
}

func newServerWorker() *serverWorker {
	w := &serverWorker{conns: make(chan *Conn), errs: make(chan error)}
	go func() {
		for c := range w.conns {
			w.errs <- c.Handshake()
		}
	}()
	return w
}

func (w *serverWorker) stop() { close(w.conns) }

func (w *serverWorker) runHandshake(b *testing.B, ccfg, scfg *Config) bool {
	c, s := memPipe()
	client, server := Client(c, ccfg), Server(s, scfg)
	w.conns <- server
	if err := client.Handshake(); err != nil {
		b.Fatal(err)
	}
	if err := <-w.errs; err != nil {
		b.Fatal(err)
	}
	resumed := client.ConnectionState().DidResume
	c.Close()
	return resumed
}

// BenchmarkHandshake runs whole handshakes, client and server in one
// process. Compare each with BenchmarkHandshakeSM2Only, the SM2 operations
// of the same handshake alone.
func BenchmarkHandshake(b *testing.B) {
	for _, suite := range allSuites {
		name := CipherSuiteName(suite)
		b.Run(name+"/full", func(b *testing.B) {
			ccfg, scfg := suiteConfigs(b, suite, false)
			benchHandshake(b, ccfg, scfg, false)
		})
		b.Run(name+"/mutual", func(b *testing.B) {
			ccfg, scfg := suiteConfigs(b, suite, true)
			benchHandshake(b, ccfg, scfg, false)
		})
		b.Run(name+"/resumed", func(b *testing.B) {
			ccfg, scfg := suiteConfigs(b, suite, false)
			benchHandshake(b, ccfg, scfg, true)
		})
		b.Run(name+"/resumed-mutual", func(b *testing.B) {
			ccfg, scfg := suiteConfigs(b, suite, true)
			benchHandshake(b, ccfg, scfg, true)
		})
	}
}

// sm2Ops holds parsed keys and certificates for BenchmarkHandshakeSM2Only.
type sm2Ops struct {
	serverSign, serverEnc, clientSign, clientEnc *sm2.PrivateKey
	chains                                       []chainCheck
}

// chainCheck is one certificate signature verification of a chain.
type chainCheck struct {
	tbs, sig []byte
	issuer   *sm2.PrivateKey
}

func newSM2Ops(b *testing.B) *sm2Ops {
	p := getPKI(b)
	o := &sm2Ops{
		serverSign: p.server.SignKey.(*sm2.PrivateKey), serverEnc: p.server.EncKey.(*sm2.PrivateKey),
		clientSign: p.client.SignKey.(*sm2.PrivateKey), clientEnc: p.client.EncKey.(*sm2.PrivateKey),
	}
	for _, der := range [][]byte{p.server.SignCertificate[0], p.server.EncCertificate[0], p.client.SignCertificate[0], p.client.EncCertificate[0]} {
		c := mustParse(b, der)
		o.chains = append(o.chains, chainCheck{tbs: c.RawTBSCertificate, sig: c.Signature, issuer: p.ca.Key})
	}
	return o
}

// verifyChain does the SM2 verification of one certificate signature.
func (o *sm2Ops) verifyChain(b *testing.B, i int) {
	c := o.chains[i]
	if !sm2.VerifyASN1WithSM2(&c.issuer.PublicKey, nil, c.tbs, c.sig) {
		b.Fatal("chain signature")
	}
}

// BenchmarkHandshakeSM2Only performs exactly the SM2 operations of one
// handshake, both sides: the floor that BenchmarkHandshake is held to.
func BenchmarkHandshakeSM2Only(b *testing.B) {
	msg := make([]byte, 64+3+500)
	rand.Read(msg)
	for _, suite := range allSuites {
		ecdhe := cipherSuiteByID(suite).ecdhe
		for _, mutual := range []bool{false, true} {
			name := CipherSuiteName(suite) + "/full"
			if mutual {
				name = CipherSuiteName(suite) + "/mutual"
			}
			b.Run(name, func(b *testing.B) {
				o := newSM2Ops(b)
				b.ReportAllocs()
				b.ResetTimer()
				cpu := startCPU()
				for i := 0; i < b.N; i++ {
					o.handshake(b, msg, ecdhe, mutual || ecdhe, mutual)
				}
				cpu.report(b)
			})
		}
	}
}

// handshake does one handshake's SM2 work: clientCert when the client
// sends certificates (and signs CertificateVerify), verifyClient when the
// server also verifies their chains.
func (o *sm2Ops) handshake(b *testing.B, msg []byte, ecdhe, clientCert, verifyClient bool) {
	// Server: ServerKeyExchange signature.
	sig, err := o.serverSign.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil {
		b.Fatal(err)
	}
	var serverEph *ecdh.PrivateKey
	if ecdhe {
		if serverEph, err = ecdh.P256().GenerateKey(rand.Reader); err != nil {
			b.Fatal(err)
		}
	}
	// Client: both server certificates' chains, the SKE signature.
	o.verifyChain(b, 0)
	o.verifyChain(b, 1)
	if !sm2.VerifyASN1WithSM2(&o.serverSign.PublicKey, nil, msg, sig) {
		b.Fatal("SKE")
	}
	if ecdhe {
		clientEph, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sm2KeyExchange(false, o.clientEnc, &o.clientEnc.PublicKey, clientEph, &o.serverEnc.PublicKey, serverEph.PublicKey().Bytes()); err != nil {
			b.Fatal(err)
		}
		if _, err := sm2KeyExchange(true, o.serverEnc, &o.serverEnc.PublicKey, serverEph, &o.clientEnc.PublicKey, clientEph.PublicKey().Bytes()); err != nil {
			b.Fatal(err)
		}
	} else {
		ct, err := sm2.Encrypt(rand.Reader, &o.serverEnc.PublicKey, msg[:48], sm2.ASN1EncrypterOpts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := o.serverEnc.Decrypt(nil, ct, nil); err != nil {
			b.Fatal(err)
		}
	}
	if clientCert {
		// Client: CertificateVerify; server: client chains and the
		// signature.
		digest := sm3.Sum(msg)
		cv, err := o.clientSign.Sign(rand.Reader, digest[:], sm2.DefaultSM2SignerOpts)
		if err != nil {
			b.Fatal(err)
		}
		if verifyClient {
			o.verifyChain(b, 2)
			o.verifyChain(b, 3)
		}
		if !sm2.VerifyASN1WithSM2(&o.clientSign.PublicKey, nil, digest[:], cv) {
			b.Fatal("CV")
		}
	}
}

// BenchmarkRecord measures the record layer: a 16 KiB record sealed and
// opened (16KiB), a 16 KiB record sealed alone (seal/16KiB), and a 64 KiB
// Write through a connection, which seals the records of a bulk write
// together (write/64KiB). BenchmarkRecordRaw does the cryptography of the
// first with gmsm directly. MB/cpu-s is the throughput per second of CPU
// time: per core, and steadier than MB/s on a shared machine.
func BenchmarkRecord(b *testing.B) {
	kb := make([]byte, 128)
	rand.Read(kb)
	payload := make([]byte, 64<<10)
	for _, tc := range []struct {
		name  string
		suite uint16
	}{{"GCM", ECC_SM4_GCM_SM3}, {"CBC", ECC_SM4_CBC_SM3}} {
		suite := cipherSuiteByID(tc.suite)
		b.Run(tc.name+"/16KiB", func(b *testing.B) {
			_, w, _ := suite.newCiphers(kb, true)
			r, _, _ := suite.newCiphers(kb, false)
			buf := make([]byte, 0, 16384+recordHeaderLen+256)
			benchBytes(b, 16384, func(i int) error {
				rec, err := w.seal(buf[:0], recordTypeApplicationData, payload[:16384], uint64(i), rand.Reader)
				if err == nil {
					_, err = r.open(rec, uint64(i))
				}
				return err
			})
		})
		b.Run(tc.name+"/seal/16KiB", func(b *testing.B) {
			_, w, _ := suite.newCiphers(kb, true)
			buf := make([]byte, 0, 16384+recordHeaderLen+256)
			benchBytes(b, 16384, func(i int) error {
				_, err := w.seal(buf[:0], recordTypeApplicationData, payload[:16384], uint64(i), rand.Reader)
				return err
			})
		})
		b.Run(tc.name+"/open/16KiB", func(b *testing.B) {
			// Records sealed beforehand, opened in place from a copy (the
			// copy, 16 KiB of memmove, is part of the figure).
			_, w, _ := suite.newCiphers(kb, true)
			r, _, _ := suite.newCiphers(kb, false)
			const n = 64
			sealed := make([][]byte, n)
			for i := range sealed {
				sealed[i], _ = w.seal(nil, recordTypeApplicationData, payload[:16384], uint64(i), rand.Reader)
			}
			buf := make([]byte, 0, 16384+recordHeaderLen+256)
			seq := 0
			benchBytes(b, 16384, func(int) error {
				if seq == n {
					// The sequence numbers start again: a fresh reader.
					r, _, _ = suite.newCiphers(kb, false)
					seq = 0
				}
				rec := append(buf[:0], sealed[seq]...)
				_, err := r.open(rec, uint64(seq))
				seq++
				return err
			})
		})
		b.Run(tc.name+"/write/64KiB", func(b *testing.B) {
			_, w, _ := suite.newCiphers(kb, true)
			c := discardingConn(w)
			benchBytes(b, len(payload), func(int) error {
				_, err := c.Write(payload)
				return err
			})
		})
	}
}

// benchBytes runs op b.N times, each on size bytes, and reports MB/s,
// allocations and MB per CPU-second.
func benchBytes(b *testing.B, size int, op func(i int) error) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	cpu.reportBytes(b, size)
}

// discardingConn is an established connection that seals with w and
// writes nowhere.
func discardingConn(w recordCipher) *Conn {
	c := &Conn{conn: discardConn{}, config: &Config{}}
	c.out.cipher = w
	c.isHandshakeComplete.Store(true)
	return c
}

// discardConn is a net.Conn whose writes go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }

func BenchmarkRecordRaw(b *testing.B) {
	key := make([]byte, 16)
	macKey := make([]byte, 32)
	rand.Read(key)
	payload := make([]byte, 16384)
	b.Run("GCM/16KiB", func(b *testing.B) {
		block, _ := sm4.NewCipher(key)
		aead, _ := cipher.NewGCM(block)
		nonce := make([]byte, 12)
		ad := make([]byte, 13)
		buf := make([]byte, 0, 16384+16)
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ct := aead.Seal(buf[:0], nonce, payload, ad)
			if _, err := aead.Open(ct[:0], nonce, ct, ad); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CBC/16KiB", func(b *testing.B) {
		block, _ := sm4.NewCipher(key)
		mac := hmac.New(sm3.New, macKey)
		iv := make([]byte, 16)
		// plaintext || MAC || padding, as one record carries it
		body := make([]byte, 16384+32+16)
		sum := make([]byte, 0, 32)
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			mac.Reset()
			mac.Write(payload)
			copy(body[16384:], mac.Sum(sum[:0]))
			cipher.NewCBCEncrypter(block, iv).CryptBlocks(body, body)
			cipher.NewCBCDecrypter(block, iv).CryptBlocks(body, body)
			mac.Reset()
			mac.Write(body[:16384])
			mac.Sum(sum[:0])
		}
	})
}

// BenchmarkHandshakeOverSM2 interleaves full handshakes and their SM2
// operations alone in short alternating bursts, so that a busy machine
// slows both alike, and reports the CPU time of each and their ratio: the
// cost of everything that is not SM2 (protocol, hashing, parsing,
// allocation), as a factor.
func BenchmarkHandshakeOverSM2(b *testing.B) {
	msg := make([]byte, 64+3+500)
	rand.Read(msg)
	for _, suite := range allSuites {
		ecdhe := cipherSuiteByID(suite).ecdhe
		for _, mutual := range []bool{false, true} {
			name := CipherSuiteName(suite) + "/full"
			if mutual {
				name = CipherSuiteName(suite) + "/mutual"
			}
			b.Run(name, func(b *testing.B) {
				ccfg, scfg := suiteConfigs(b, suite, mutual)
				o := newSM2Ops(b)
				w := newServerWorker()
				defer w.stop()
				const burst = 20
				var hsCPU, sm2CPU time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += burst {
					n := min(burst, b.N-done)
					t0 := processCPU()
					for i := 0; i < n; i++ {
						w.runHandshake(b, ccfg, scfg)
					}
					t1 := processCPU()
					for i := 0; i < n; i++ {
						o.handshake(b, msg, ecdhe, mutual || ecdhe, mutual)
					}
					t2 := processCPU()
					hsCPU += t1 - t0
					sm2CPU += t2 - t1
				}
				b.ReportMetric(float64(hsCPU)/float64(b.N), "handshake-cpu-ns/op")
				b.ReportMetric(float64(sm2CPU)/float64(b.N), "sm2-cpu-ns/op")
				b.ReportMetric(float64(hsCPU)/float64(sm2CPU), "x-sm2")
			})
		}
	}
}

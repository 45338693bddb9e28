package tlcp

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm4"
)

// memConn is a net.Conn that reads a fixed input and discards writes.
type memConn struct {
	r *bytes.Reader
}

func (m *memConn) Read(b []byte) (int, error)       { return m.r.Read(b) }
func (m *memConn) Write(b []byte) (int, error)      { return len(b), nil }
func (m *memConn) Close() error                     { return nil }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// recordingConn keeps what it reads.
type recordingConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
}

func (r *recordingConn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.mu.Lock()
	r.read = append(r.read, b[:n]...)
	r.mu.Unlock()
	return n, err
}

// recordSeeds returns the byte streams of real handshakes (with some data
// after them): what a server reads and what a client reads.
func recordSeeds(t testing.TB) (toServer, toClient [][]byte) {
	for _, suite := range allSuites {
		ccfg, scfg := suiteConfigs(t, suite, suite == ECC_SM4_CBC_SM3)
		c, s := localPipe(t)
		rc, rs := &recordingConn{Conn: c}, &recordingConn{Conn: s}
		client, server := Client(rc, ccfg), Server(rs, scfg)
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, 5)
			_, err := io.ReadFull(server, buf)
			if err == nil {
				_, err = server.Write([]byte("world"))
			}
			done <- err
		}()
		if _, err := client.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		client.Close()
		server.Close()
		rc.mu.Lock()
		rs.mu.Lock()
		toServer = append(toServer, rs.read)
		toClient = append(toClient, rc.read)
		rc.mu.Unlock()
		rs.mu.Unlock()
	}
	return toServer, toClient
}

var (
	recordSeedOnce               sync.Once
	seedsToServer, seedsToClient [][]byte
)

func cachedRecordSeeds(t testing.TB) ([][]byte, [][]byte) {
	recordSeedOnce.Do(func() { seedsToServer, seedsToClient = recordSeeds(t) })
	return seedsToServer, seedsToClient
}

// FuzzServerRecords feeds arbitrary bytes to a server as if a client sent
// them: the handshake must fail or succeed, never panic or hang.
func FuzzServerRecords(f *testing.F) {
	toServer, _ := cachedRecordSeeds(f)
	for _, s := range toServer {
		f.Add(s)
	}
	cfg := serverConfig(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Server(&memConn{r: bytes.NewReader(data)}, cfg)
		if c.Handshake() == nil {
			io.Copy(io.Discard, c)
		}
	})
}

// FuzzClientRecords feeds arbitrary bytes to a client as if a server sent
// them.
func FuzzClientRecords(f *testing.F) {
	_, toClient := cachedRecordSeeds(f)
	for _, s := range toClient {
		f.Add(s)
	}
	cfg := clientConfig(f)
	cfg.InsecureSkipVerify = true
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Client(&memConn{r: bytes.NewReader(data)}, cfg)
		if c.Handshake() == nil {
			io.Copy(io.Discard, c)
		}
	})
}

// FuzzRecordOpen feeds arbitrary protected records to both record ciphers:
// no panic, and only authentic records open.
func FuzzRecordOpen(f *testing.F) {
	kb := bytes.Repeat([]byte{7}, 128)
	for _, id := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		_, w, _ := cipherSuiteByID(id).newCiphers(kb, true)
		for _, n := range []int{0, 1, 15, 16, 100} {
			rec, _ := w.seal(nil, recordTypeApplicationData, bytes.Repeat([]byte{'a'}, n), 0, bytes.NewReader(make([]byte, 16)))
			f.Add(rec, uint8(0))
			f.Add(rec, uint8(1))
		}
	}
	f.Fuzz(func(t *testing.T, record []byte, which uint8) {
		if len(record) < recordHeaderLen {
			return
		}
		id := ECC_SM4_GCM_SM3
		if which&1 == 1 {
			id = ECC_SM4_CBC_SM3
		}
		r, _, err := cipherSuiteByID(id).newCiphers(kb, false)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := r.open(bytes.Clone(record), 0)
		if err == nil && len(pt) > len(record) {
			t.Fatal("plaintext longer than the record")
		}
	})
}

// TestSealOpenRoundTrip checks every plaintext length across block
// boundaries for both record ciphers.
func TestSealOpenRoundTrip(t *testing.T) {
	kb := make([]byte, 128)
	for i := range kb {
		kb[i] = byte(i)
	}
	for _, id := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		suite := cipherSuiteByID(id)
		_, w, _ := suite.newCiphers(kb, true)
		r, _, _ := suite.newCiphers(kb, false)
		for n := 0; n < 300; n++ {
			payload := bytes.Repeat([]byte{byte(n)}, n)
			rec, err := w.seal(nil, recordTypeApplicationData, payload, uint64(n), randReader{})
			if err != nil {
				t.Fatal(err)
			}
			pt, err := r.open(rec, uint64(n))
			if err != nil || !bytes.Equal(pt, payload) {
				t.Fatalf("%s n=%d: %v", suite.name, n, err)
			}
			// The wrong sequence number must fail.
			rec2, _ := w.seal(nil, recordTypeApplicationData, payload, uint64(n), randReader{})
			if _, err := r.open(rec2, uint64(n)+1); err == nil {
				t.Fatalf("%s n=%d: opened with the wrong sequence number", suite.name, n)
			}
		}
	}
}

type randReader struct{}

func (randReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(i * 7)
	}
	return len(b), nil
}

// TestCBCPaddingChecks exercises the padding check directly: every
// well-formed padding passes, every malformed one fails.
func TestCBCPaddingChecks(t *testing.T) {
	for total := sm3Size + 1; total < 400; total += 7 {
		for p := 0; p < 256; p += 5 {
			b := make([]byte, total)
			good := p+1+sm3Size <= total
			if good {
				for i := total - p - 1; i < total; i++ {
					b[i] = byte(p)
				}
			} else {
				b[total-1] = byte(p)
			}
			n, ok := checkPadding(b)
			if (ok == 1) != good || (good && n != p+1) {
				t.Fatalf("total %d pad %d: got (%d, %d), good=%v", total, p, n, ok, good)
			}
			if good && p > 0 {
				b[total-1-p] ^= 1 // one wrong padding byte
				if _, ok := checkPadding(b); ok == 1 {
					t.Fatalf("total %d pad %d: bad padding byte accepted", total, p)
				}
			}
		}
	}
}

// TestCBCDecrypterReused opens records of random IVs, one after another,
// with the decrypter each reading cipher keeps (and with the fallback
// that makes one per record): each record's IV must replace the last
// one's chaining state.
func TestCBCDecrypterReused(t *testing.T) {
	kb := make([]byte, 128)
	for i := range kb {
		kb[i] = byte(3 * i)
	}
	suite := cipherSuiteByID(ECC_SM4_CBC_SM3)
	_, w, _ := suite.newCiphers(kb, true)
	if c := w.(*cbcRecord); c.enc == nil || c.dec != nil {
		t.Fatalf("a sealing cipher has enc %v and dec %v", c.enc != nil, c.dec != nil)
	}
	for _, fallback := range []bool{false, true} {
		r, _, _ := suite.newCiphers(kb, false)
		c := r.(*cbcRecord)
		if c.enc != nil || c.dec == nil {
			t.Fatalf("an opening cipher has enc %v and dec %v", c.enc != nil, c.dec != nil)
		}
		if fallback {
			block, err := sm4.NewCipher(kb[2*sm3Size : 2*sm3Size+16])
			if err != nil {
				t.Fatal(err)
			}
			c.dec = &freshCBC{block: block}
		}
		for n := range 100 {
			payload := bytes.Repeat([]byte{byte(n)}, 17*n)
			rec, err := w.seal(nil, recordTypeApplicationData, payload, uint64(n), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			pt, err := r.open(rec, uint64(n))
			if err != nil || !bytes.Equal(pt, payload) {
				t.Fatalf("fallback %v, record %d: %v", fallback, n, err)
			}
		}
	}
}

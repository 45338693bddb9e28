package tlcp

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm4"
)

// TestIdleConnHoldsNoBuffers checks that a connection between records
// keeps no input buffer and no handshake buffer: what an idle keep-alive
// connection costs.
func TestIdleConnHoldsNoBuffers(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			done := make(chan error, 1)
			for _, conn := range []*Conn{client, server} {
				if conn.hand.Cap() != 0 {
					t.Fatalf("isClient=%v: the handshake buffer (%d bytes) is kept after the handshake", conn.isClient, conn.hand.Cap())
				}
				if conn.handPtr != nil {
					t.Fatalf("isClient=%v: the pooled handshake buffer is not given back", conn.isClient)
				}
			}
			for _, n := range []int{100, 20000} {
				go func() {
					_, err := client.Write(make([]byte, n))
					done <- err
				}()
				server.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(server, make([]byte, n)); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if server.rawBuf != nil {
					t.Fatalf("after reading a write of %d bytes the server holds a %d-byte input buffer", n, len(server.rawBuf))
				}
			}
		})
	}
}

// TestWriteAllocatesNothing: sealing small and bulk writes borrows its
// buffers. The one exception is SM4-GCM where gmsm has no GCM of its own
// (loong64, purego builds): Go's generic GCM over a plain cipher.Block
// then allocates a few small values per record, and the test holds it to
// that.
func TestWriteAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector; .ci/run runs this test without it")
	}
	kb := make([]byte, 128)
	rand.Read(kb)
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		_, w, err := cipherSuiteByID(suite).newCiphers(kb, true)
		if err != nil {
			t.Fatal(err)
		}
		c := discardingConn(w)
		perRecord := 0.0
		if _, ok := w.(*gcmRecord); ok && genericGCM(t) {
			perRecord = 6
			t.Logf("%s: Go's generic GCM on this build (%s): at most %v allocations per record", CipherSuiteName(suite), runtime.GOARCH, perRecord)
		}
		for _, n := range []int{100, 64 << 10} {
			b := make([]byte, n)
			records := float64((n + maxPlaintext - 1) / maxPlaintext)
			if allocs := testing.AllocsPerRun(20, func() {
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
			}); allocs > perRecord*records {
				t.Errorf("%s: a write of %d bytes makes %.1f allocations, want at most %v", CipherSuiteName(suite), n, allocs, perRecord*records)
			}
		}
	}
}

// genericGCM reports whether gmsm's SM4 has no GCM of its own in this
// build, so that cipher.NewGCM gives crypto/cipher's generic one.
func genericGCM(t testing.TB) bool {
	block, err := sm4.NewCipher(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	_, ok := block.(interface {
		NewGCM(nonceSize, tagSize int) (cipher.AEAD, error)
	})
	return !ok
}

// TestEndedReadsHoldNoBuffer checks that a connection gives its input
// buffer back once a handshake is done with it, and once a Read has found
// the peer's end: a connection that only handshakes, or whose peer left,
// keeps no buffer until it is closed, and the next connection reuses it.
func TestEndedReadsHoldNoBuffer(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			client, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			for _, conn := range []*Conn{client, server} {
				if conn.rawBuf != nil {
					t.Fatalf("isClient=%v: a %d-byte input buffer is kept after the handshake", conn.isClient, len(conn.rawBuf))
				}
			}
			if _, err := client.Write([]byte("last words")); err != nil {
				t.Fatal(err)
			}
			if err := client.Close(); err != nil {
				t.Fatal(err)
			}
			server.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(server)
			if err != nil || string(got) != "last words" {
				t.Fatalf("read %q, %v", got, err)
			}
			if server.rawBuf != nil {
				t.Fatalf("a %d-byte input buffer is kept after the peer's close_notify", len(server.rawBuf))
			}
		})
	}
}

// holdingConn passes writes on, or keeps them while hold is set.
type holdingConn struct {
	net.Conn
	hold bool
	held []byte
}

func (c *holdingConn) Write(b []byte) (int, error) {
	if c.hold {
		c.held = append(c.held, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// TestReadAfterTimeout checks that a Read that timed out, with nothing
// of a record read (its input buffer given back) or with part of one
// (kept), leaves the next Read to return the data that comes next, whole
// and in order, and nothing of before.
func TestReadAfterTimeout(t *testing.T) {
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg, scfg := suiteConfigs(t, suite, false)
			raw, s := localPipe(t)
			hc := &holdingConn{Conn: raw}
			client, server := Client(hc, ccfg), Server(s, scfg)
			t.Cleanup(func() { client.Close(); server.Close() })
			errc := make(chan error, 1)
			go func() { errc <- server.Handshake() }()
			if err := client.Handshake(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			read := func(want string) {
				t.Helper()
				server.SetReadDeadline(time.Now().Add(10 * time.Second))
				n, err := server.Read(buf)
				if err != nil || string(buf[:n]) != want {
					t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
				}
			}
			timeout := func(after time.Duration) {
				t.Helper()
				server.SetReadDeadline(time.Now().Add(after))
				if n, err := server.Read(buf); n != 0 || !isTimeout(err) {
					t.Fatalf("read %q, %v; want a timeout", buf[:n], err)
				}
			}
			if _, err := client.Write([]byte("first")); err != nil {
				t.Fatal(err)
			}
			read("first")
			timeout(-time.Second)
			if server.rawBuf != nil {
				t.Fatal("a Read that timed out between records keeps the input buffer")
			}
			if _, err := client.Write([]byte("second")); err != nil {
				t.Fatal(err)
			}
			read("second")

			// A record of which only the header has come.
			hc.hold = true
			if _, err := client.Write([]byte("third")); err != nil {
				t.Fatal(err)
			}
			hc.hold = false
			if _, err := raw.Write(hc.held[:recordHeaderLen]); err != nil {
				t.Fatal(err)
			}
			// The Read takes the header in and waits for the rest.
			for i := 0; ; i++ {
				timeout(20 * time.Millisecond)
				server.in.Lock()
				got := server.rawW - server.rawR
				server.in.Unlock()
				if got == recordHeaderLen {
					break
				}
				if i == 500 {
					t.Fatalf("%d bytes read of the record, want its header", got)
				}
			}
			if _, err := raw.Write(hc.held[recordHeaderLen:]); err != nil {
				t.Fatal(err)
			}
			read("third")
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

package tlcp

import (
	"crypto/rand"
	"io"
	"testing"
	"time"
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
// buffers.
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
		for _, n := range []int{100, 64 << 10} {
			b := make([]byte, n)
			if allocs := testing.AllocsPerRun(20, func() {
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Errorf("%s: a write of %d bytes makes %.1f allocations", CipherSuiteName(suite), n, allocs)
			}
		}
	}
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

package tlcp

import (
	"net"
	"sync"
	"testing"
	"time"
)

// stallConn is a connection whose writes, once stall is set, block until
// it is closed: a peer that stopped reading, with the socket buffers full.
type stallConn struct {
	net.Conn
	mu       sync.Mutex
	stall    bool
	entered  chan struct{} // closed when a write blocks
	closed   chan struct{}
	closeOne sync.Once
}

func newStallConn(c net.Conn) *stallConn {
	return &stallConn{Conn: c, entered: make(chan struct{}), closed: make(chan struct{})}
}

func (s *stallConn) startStalling() {
	s.mu.Lock()
	s.stall = true
	s.mu.Unlock()
}

func (s *stallConn) Write(b []byte) (int, error) {
	s.mu.Lock()
	stall := s.stall
	s.mu.Unlock()
	if !stall {
		return s.Conn.Write(b)
	}
	select {
	case <-s.entered:
	default:
		close(s.entered)
	}
	<-s.closed
	return 0, net.ErrClosed
}

func (s *stallConn) Close() error {
	s.closeOne.Do(func() { close(s.closed) })
	return s.Conn.Close()
}

// TestCloseUnblocksStalledWrite: Close called while a Write is blocked on a
// peer that does not read returns at once and makes the Write fail, as
// with crypto/tls; it does not wait for the Write (forever, without a
// deadline) to send close_notify.
func TestCloseUnblocksStalledWrite(t *testing.T) {
	ccfg, scfg := suiteConfigs(t, ECC_SM4_GCM_SM3, false)
	c, s := localPipe(t)
	sc := newStallConn(c)
	client, server := Client(sc, ccfg), Server(s, scfg)
	defer server.Close()
	handshakeBoth(t, client, server)

	sc.startStalling()
	writeErr := make(chan error, 1)
	go func() {
		_, err := client.Write(make([]byte, 1<<16))
		writeErr <- err
	}()
	<-sc.entered

	closed := make(chan error, 1)
	go func() { closed <- client.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		sc.Close() // let the test end
		<-closed
		t.Fatal("Close blocked behind a stalled Write")
	}
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("the stalled Write succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled Write did not return after Close")
	}
}

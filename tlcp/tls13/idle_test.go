package tls13

import (
	"errors"
	"os"
	"testing"
	"time"
)

// A Read that times out with nothing received keeps no input buffer (an
// idle connection of a server holds none while it waits), and the
// connection goes on after it.
func TestIdleReadHoldsNoBuffer(t *testing.T) {
	cli, srv := mustHandshake(t, serverConfig(t), clientConfig(t))
	exchange(t, cli, srv, []byte("first"))
	_ = srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a timeout", err)
	}
	srv.in.Lock()
	held := srv.rawBuf != nil
	srv.in.Unlock()
	if held {
		t.Error("a timed-out read kept the input buffer")
	}
	_ = srv.SetReadDeadline(time.Time{})
	exchange(t, cli, srv, []byte("after the timeout"))
}

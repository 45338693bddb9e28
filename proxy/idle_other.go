//go:build !unix

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// waitReadable is not available here: connections are not parked
// (parkSocket gives none), and a parked one would be closed.
func waitReadable(syscall.Conn) error {
	return errors.New("waiting for a readable socket is not supported on this platform")
}

// parkSocket gives no socket: connections are not parked here.
func parkSocket(net.Conn) syscall.Conn { return nil }

// peekSocket cannot look without reading here: an idle upstream
// connection is taken as alive, and one the target closed fails its next
// request, which is retried when it may be.
func peekSocket(net.Conn, []byte) (int, error) { return 0, errWouldBlock }

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

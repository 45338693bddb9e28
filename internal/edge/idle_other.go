//go:build !unix

package edge

import (
	"errors"
	"net"
	"syscall"
)

// waitReadable is not available here: connections are not parked
// (ParkSocket gives none), and a parked one would be closed.
func waitReadable(syscall.Conn) error {
	return errors.New("waiting for a readable socket is not supported on this platform")
}

// ParkSocket gives no socket: connections are not parked here.
func ParkSocket(net.Conn) syscall.Conn { return nil }

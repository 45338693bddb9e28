//go:build unix

package edge

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitReadable blocks until the socket has bytes to read or the peer has
// closed it, or its read deadline passes; it reads nothing.
func waitReadable(sc syscall.Conn) error {
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var peekErr error
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch err {
		case unix.EAGAIN, unix.EINTR:
			// Nothing yet: wait until the poller says readable.
			return false
		case nil:
			// Bytes, or the end of the stream.
			return true
		}
		peekErr = err
		return true
	})
	if err != nil {
		return err
	}
	return peekErr
}

// parkSocket returns the socket of an accepted connection to wait on
// while it is parked, or nil when it has none.
func ParkSocket(c net.Conn) syscall.Conn {
	sc, _ := c.(syscall.Conn)
	return sc
}

//go:build unix

package h1client

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errWouldBlock is peekSocket finding nothing to read.
var errWouldBlock = errors.New("nothing to read")

// peekSocket copies what c has to read into buf without consuming it or
// waiting: errWouldBlock when there is nothing, (0, nil) when the peer has
// closed its side.
func peekSocket(c net.Conn, buf []byte) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, errWouldBlock
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var peekErr error
	peek := func(fd uintptr) bool {
		n, _, peekErr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	}
	err = rc.Read(peek)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A read deadline left from the last response: an idle
		// connection has none.
		_ = c.SetReadDeadline(time.Time{})
		err = rc.Read(peek)
	}
	switch {
	case err != nil:
		return 0, err
	case peekErr == unix.EAGAIN || peekErr == unix.EINTR:
		return 0, errWouldBlock
	case peekErr != nil:
		return 0, peekErr
	}
	return n, nil
}

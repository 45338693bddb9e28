//go:build unix

package proxy

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

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
func parkSocket(c net.Conn) syscall.Conn {
	sc, _ := c.(syscall.Conn)
	return sc
}

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

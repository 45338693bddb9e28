//go:build !unix

package h1client

import (
	"errors"
	"net"
)

// errWouldBlock is peekSocket finding nothing to read.
var errWouldBlock = errors.New("nothing to read")

// peekSocket cannot look without reading here: an idle upstream
// connection is taken as alive, and one the target closed fails its next
// request, which is retried when it may be.
func peekSocket(net.Conn, []byte) (int, error) { return 0, errWouldBlock }

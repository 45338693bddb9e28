// Package tcplisten opens TCP listening sockets for protocols whose client
// speaks first (TLCP, TLS, the PROXY protocol), with the per-connection
// socket options set once, on the listener.
//
// Go's net package enables keep-alive on every accepted connection with
// four setsockopt calls (SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL,
// TCP_KEEPCNT). Where the kernel copies these options from the listening
// socket to the sockets it accepts (Linux does), setting them once on the
// listener gives every connection the same probes for no system call.
//
// With DeferAccept the kernel hands a connection over once its first bytes
// (a ClientHello) have arrived, so the first read finds them instead of
// parking the goroutine, and a connection that does not speak costs no
// goroutine until about DeferAccept has passed (Linux's TCP_DEFER_ACCEPT).
// After that the kernel hands it over silent: the server still needs its
// own deadline for the first bytes.
package tcplisten

import (
	"context"
	"net"
	"time"
)

// KeepAlive is the keep-alive configuration of accepted connections: the
// values Go's net package uses by default.
var KeepAlive = net.KeepAliveConfig{
	Enable:   true,
	Idle:     15 * time.Second,
	Interval: 15 * time.Second,
	Count:    9,
}

// Config is how a listener treats the connections it accepts.
type Config struct {
	// KeepAlive configures TCP keep-alive on accepted connections.
	KeepAlive net.KeepAliveConfig
	// DeferAccept, when positive, delays handing over a connection until
	// its first data has arrived or about this long has passed (rounded
	// up to whole seconds). Only for protocols whose client speaks first.
	DeferAccept time.Duration
}

// Listen announces on the TCP address addr. Accepted connections have
// TCP_NODELAY set, like those of net.Listen.
func (c Config) Listen(ctx context.Context, addr string) (net.Listener, error) {
	return listenConfig(c).Listen(ctx, "tcp", addr)
}

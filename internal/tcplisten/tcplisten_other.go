//go:build !linux

package tcplisten

import (
	"net"
	"time"
)

// listenConfig leaves keep-alive to the net package, which sets it on each
// accepted connection; DeferAccept has no effect.
func listenConfig(c Config) *net.ListenConfig {
	return &net.ListenConfig{KeepAliveConfig: c.KeepAlive}
}

// SetDeferAccept does nothing: deferred accept is Linux's.
func SetDeferAccept(net.Listener, time.Duration) error { return nil }

//go:build !linux

package tcplisten

import "net"

// listenConfig leaves keep-alive to the net package, which sets it on each
// accepted connection; DeferAccept has no effect.
func listenConfig(c Config) *net.ListenConfig {
	return &net.ListenConfig{KeepAliveConfig: c.KeepAlive}
}

// Package testnet serves loopback TCP listeners for tests.
//
// It is for tests only. It imports nothing but the standard library, so
// the internal tests of any package in the module can use it.
package testnet

import (
	"net"
	"sync"
	"testing"
)

// FreePort returns a TCP port of 127.0.0.1 that is free now, for a
// server that must be given its port (and may get it again on a restart).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Serve listens on 127.0.0.1 on a free port and hands each connection it
// accepts to serve, in a goroutine of its own; the connection is closed
// when serve returns. When the test ends, the listener is closed and
// Serve's cleanup waits until every serve has returned. It returns the
// listener's address.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

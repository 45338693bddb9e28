// Package testsession has a client session cache that offers its one
// session to every server, so that a test can offer a session made with
// one server name (one site) to another and check that it is refused.
//
// It is for tests only and imports nothing but the standard library.
package testsession

import "sync"

// One holds the last session put; Get returns it for any key. *One[T]
// is a tls.ClientSessionCache with T tls.ClientSessionState, and a
// tlcp.ClientSessionCache with T tlcp.ClientSessionState.
type One[T any] struct {
	mu sync.Mutex
	s  *T
}

// Get returns the session held, whatever the key.
func (o *One[T]) Get(string) (*T, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s, o.s != nil
}

// Put keeps s (a nil s, which removes a session, is ignored).
func (o *One[T]) Put(_ string, s *T) {
	if s == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.s = s
}

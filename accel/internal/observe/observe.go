// Package observe holds the interface through which key backends report
// what they do, shared by package accel and its backends.
package observe

import "time"

// Observer receives what backends do, for metrics. Implementations must be
// safe for concurrent use and fast.
type Observer interface {
	// Op reports one private-key operation: op is "sign" or "decrypt",
	// err its outcome.
	Op(backend, op string, err error, d time.Duration)
	// PoolWait reports how long a call waited for a session.
	PoolWait(backend string, d time.Duration)
	// PoolInUse reports a change of the number of sessions in use.
	PoolInUse(backend string, delta int)
}

// Nop discards every report.
type Nop struct{}

func (Nop) Op(string, string, error, time.Duration) {}
func (Nop) PoolWait(string, time.Duration)          {}
func (Nop) PoolInUse(string, int)                   {}

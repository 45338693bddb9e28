package upstream

import (
	"time"
)

// What operators see of a target and may change: the admin API reads a
// target's state here and drains it.

// targetError is the last failure seen on a target.
type targetError struct {
	at  time.Time
	msg string
}

// maxErrorText bounds the kept error text.
const maxErrorText = 256

func (t *Target) noteError(err error) {
	msg := err.Error()
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	t.lastErr.Store(&targetError{at: time.Now(), msg: msg})
}

// TargetState is a target's state at one moment.
type TargetState struct {
	URL string
	// Healthy is the active health checks' verdict (true without checks).
	Healthy bool
	// EjectedUntil is when a passive ejection ends (zero when the target
	// is not ejected).
	EjectedUntil time.Time
	// Drained targets get no new requests until undrained.
	Drained  bool
	InFlight int64
	// LastError and LastErrorAt are the last failure seen, by a health
	// check or on real traffic ("" when none).
	LastError   string
	LastErrorAt time.Time
}

// State returns the target's state at now.
func (t *Target) State(now time.Time) TargetState {
	st := TargetState{
		URL:      t.url.String(),
		Healthy:  t.healthy.Load(),
		Drained:  t.drained.Load(),
		InFlight: t.Inflight.Load(),
	}
	if until := t.ejectedUntil.Load(); until > now.UnixNano() {
		st.EjectedUntil = time.Unix(0, until)
	}
	if e := t.lastErr.Load(); e != nil {
		st.LastError, st.LastErrorAt = e.msg, e.at
	}
	return st
}

// SetDrained takes the target out of selection (true) or puts it back;
// requests in flight finish. It reports whether the state changed.
func (t *Target) SetDrained(drained bool) bool {
	return t.drained.Swap(drained) != drained
}

// Target returns the pool's target whose URL or host:port is name (nil
// when none is).
func (p *Pool) Target(name string) *Target {
	for _, t := range p.Targets {
		if t.url.String() == name || t.Addr == name {
			return t
		}
	}
	return nil
}

// UpdateHealthy recounts the targets in service for the metrics, after a
// drain or an undrain.
func (p *Pool) UpdateHealthy() { p.updateHealthyGauge() }

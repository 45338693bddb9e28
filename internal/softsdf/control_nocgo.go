//go:build !cgo

package softsdf

import "errors"

var errNoCgo = errors.New("softsdf needs cgo")

// Lib is a loaded instance of the library.
type Lib struct{}

// Load fails without cgo.
func Load(string) (*Lib, error) { return nil, errNoCgo }

// Control fails without cgo.
func (*Lib) Control(string, int64) error { return errNoCgo }

// Stats is empty without cgo.
func (*Lib) Stats() Stats { return Stats{} }

// BenchDirect fails without cgo.
func (*Lib) BenchDirect(int, string, string, int) error { return errNoCgo }

// BenchSDF fails without cgo.
func (*Lib) BenchSDF(int, uint32, []byte, []byte, []byte, int) error { return errNoCgo }

// Probe results (empty without cgo).
type Probe struct {
	SecondOpenDevice, UnknownSession, ShortDigest, NoAccessRight uint32
	BusySession, WrongPIN, IndexZero, BusyCallItself             uint32
}

// Probe fails without cgo.
func (*Lib) Probe(uint32, []byte) (Probe, error) { return Probe{}, errNoCgo }

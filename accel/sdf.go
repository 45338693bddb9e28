package accel

import (
	"context"
	"fmt"
	"time"

	"github.com/gmgate/gmgate/accel/sdf"
)

func init() { Register("sdf", sdfBackend{}) }

// sdfBackend opens keys held by crypto cards through a vendor's SDF
// library; see package sdf for the reference parameters.
type sdfBackend struct{}

// Check refuses what Open refuses in the reference's parameters, reading
// no PIN and loading no library.
func (sdfBackend) Check(ref *Ref) error {
	if _, err := sdf.CheckConfig(ref.Path, ref.Params); err != nil {
		return fmt.Errorf("key %s: %w", ref, err)
	}
	return nil
}

func (sdfBackend) Open(ctx context.Context, ref *Ref) (Key, error) {
	cfg, err := sdf.ParseConfig(ref.Path, ref.Params)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", ref, err)
	}
	k, err := sdf.Open(ctx, cfg, forwardObserver{})
	clear(cfg.PIN) // the device keeps its own copy
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", ref, err)
	}
	return k, nil
}

// forwardObserver hands reports to the observer installed when they
// happen, so that SetObserver may come after keys are opened.
type forwardObserver struct{}

func (forwardObserver) Op(backend, op string, err error, d time.Duration) {
	currentObserver().Op(backend, op, err, d)
}
func (forwardObserver) PoolWait(backend string, d time.Duration) {
	currentObserver().PoolWait(backend, d)
}
func (forwardObserver) PoolInUse(backend string, delta int) {
	currentObserver().PoolInUse(backend, delta)
}

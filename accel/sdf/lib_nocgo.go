//go:build !cgo

package sdf

import "fmt"

func loadLibrary(path string) (library, error) {
	return nil, fmt.Errorf("%w: this gmgate binary cannot load the SDF library %s; rebuild it with CGO_ENABLED=1 (gcc needed) to use sdf: keys", ErrNoCgo, path)
}

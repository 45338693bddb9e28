//go:build !cgo

package sdf_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/accel/sdf"
)

func TestOpenWithoutCgo(t *testing.T) {
	_, err := accel.Open(context.Background(), "sdf:/opt/vendor/libsdf.so?index=1&key=sign")
	if !errors.Is(err, sdf.ErrNoCgo) || !strings.Contains(err.Error(), "built without cgo") || !strings.Contains(err.Error(), "/opt/vendor/libsdf.so") {
		t.Fatalf("got %v", err)
	}
}

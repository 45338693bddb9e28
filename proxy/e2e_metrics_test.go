//go:build cgo

package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/accel/sdf"
	"github.com/gmgate/gmgate/internal/softsdf"
)

// TestAccelOpsResult: gmgate_accel_ops_total carries what became of a
// key operation, as docs/keys.md lists the results, not only ok or
// error: a signature asked of a card key that was closed counts as
// closed.
func TestAccelOpsResult(t *testing.T) {
	if err := softsdf.Available(); err != nil {
		t.Skipf("cannot build the software SDF library: %v", err)
	}
	lib, err := softsdf.Build(t.TempDir(), "libsoftsdf.so")
	if err != nil {
		t.Fatal(err)
	}
	card := softsdf.NewCard(t, t.TempDir(), "11223344", 1)
	t.Setenv("SOFTSDF_KEYDIR", card.Dir)

	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "app").URL), nil)
	key, err := accel.Open(context.Background(), fmt.Sprintf("sdf:%s?index=1&key=sign&pin-file=%s", lib, card.PINFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := key.Sign(rand.Reader, []byte("open"), sm2.DefaultSM2SignerOpts); err != nil {
		t.Fatal(err)
	}
	if err := key.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := key.Sign(rand.Reader, []byte("closed"), sm2.DefaultSM2SignerOpts); !errors.Is(err, sdf.ErrClosed) {
		t.Fatalf("signing with a closed key: %v", err)
	}
	mf := scrape(t, s)
	for result, want := range map[string]float64{"ok": 1, "closed": 1, "error": 0} {
		got, _ := metricValue(mf, "gmgate_accel_ops_total", map[string]string{"backend": "sdf", "op": "sign", "result": result})
		if got != want {
			t.Errorf("gmgate_accel_ops_total{backend=sdf,op=sign,result=%s} = %v, want %v", result, got, want)
		}
	}
}

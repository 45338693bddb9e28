package revocation

import (
	"context"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// BenchmarkVerifyCRL measures what a handshake pays for a CRL check:
// one Verify of a good certificate against a CRL of 10 000 entries.
func BenchmarkVerifyCRL(b *testing.B) {
	ca := newCA(b, "sm2")
	leaf := ca.client(b, "good", "")
	serials := make([]*big.Int, 10000)
	for i := range serials {
		serials[i] = big.NewInt(int64(0x70000000 + i))
	}
	file := filepath.Join(b.TempDir(), "ca.crl")
	os.WriteFile(file, ca.crl(b, 1, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), serials...), 0o644)
	chk, err := New(Options{CRL: &CRLOptions{Sources: []string{file}, Issuers: []*smx509.Certificate{ca.cert}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := chk.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	chains := [][]*smx509.Certificate{{leaf, ca.cert}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := chk.Verify(ctx, chains); err != nil {
			b.Fatal(err)
		}
	}
}

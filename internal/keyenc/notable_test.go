package keyenc

import (
	"bytes"
	"testing"

	"github.com/gmgate/gmgate/internal/cpufeat"
)

// TestNoTableSM4 encrypts and decrypts a key file (SM4-CBC) in a build
// that counts gmsm's table-driven SM4, and checks that none was used where
// this CPU has a constant-time path.
func TestNoTableSM4(t *testing.T) {
	if !cpufeat.Tracing {
		t.Skip(cpufeat.TraceSkip)
	}
	if p := cpufeat.Current(); !p.ConstantTime() {
		t.Skip(p.Warning())
	}
	plain := plainSM2Key(t)
	before := cpufeat.TableCalls()
	for _, f := range []Format{FormatGmSSL, FormatTongsuo} {
		der, err := Encrypt(plain, []byte("pw"), f, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decrypt(der, []byte("pw"))
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%s: decrypt: %v", f, err)
		}
	}
	if n := cpufeat.TableCalls() - before; n != 0 {
		t.Fatalf("%d SM4 blocks or key schedules with lookup tables", n)
	}
}

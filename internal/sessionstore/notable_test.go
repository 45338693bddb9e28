package sessionstore

import (
	"bytes"
	"testing"

	"github.com/gmgate/gmgate/internal/cpufeat"
)

// TestNoTableSM4 seals and opens a value (a CMAC-SM4 key derivation and
// SM4-GCM) in a build that counts gmsm's table-driven SM4, and checks that
// none was used where this CPU has a constant-time path.
func TestNoTableSM4(t *testing.T) {
	if !cpufeat.Tracing {
		t.Skip(cpufeat.TraceSkip)
	}
	if p := cpufeat.Current(); !p.ConstantTime() {
		t.Skip(p.Warning())
	}
	before := cpufeat.TableCalls()
	keys := mustKeys(t, key2+"\n"+key1)
	value := []byte("a session's master secret")
	sealed, err := keys.Seal(value, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := keys.Open(sealed, []byte("ad"))
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("open: %q, %v", got, err)
	}
	if n := cpufeat.TableCalls() - before; n != 0 {
		t.Fatalf("%d SM4 blocks or key schedules with lookup tables", n)
	}
}

package cpufeat

import (
	"testing"

	"github.com/emmansun/gmsm/sm4"
)

// TestNoTableSM4Trace checks that the count works: a single block through
// gmsm with its AES-instruction code switched off is counted, the same
// block with it switched on (where this CPU has it) is not. With the ARMv8
// SM4 instructions gmsm uses them for every block, and nothing reaches
// the tables to be counted.
func TestNoTableSM4Trace(t *testing.T) {
	if !Tracing {
		t.Skip(TraceSkip)
	}
	if p := Current(); p.CPU.Arch == "arm64" && p.CPU.Features.Has(SM4) {
		t.Skip("gmsm computes every block with the SM4 instructions here")
	}
	block, err := sm4.NewCipher(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	var b [16]byte
	was := SetSingleBlockAsm(false)
	defer SetSingleBlockAsm(was)
	before := TableCalls()
	block.Encrypt(b[:], b[:])
	if TableCalls() == before {
		t.Fatal("a table-driven block was not counted")
	}
	if !Current().SingleBlockAsm {
		t.Skipf("gmsm has no single-block assembly for this CPU (%s)", Current().CPU.Features)
	}
	SetSingleBlockAsm(true)
	before = TableCalls()
	block.Encrypt(b[:], b[:])
	if n := TableCalls() - before; n != 0 {
		t.Fatalf("%d table-driven blocks with the AES-instruction code on", n)
	}
}

package testexec

import (
	"slices"
	"testing"
)

func TestArgv(t *testing.T) {
	t.Setenv(EmulatorEnv, "")
	if got := Argv("/x/pkg.test", "-test.run=^$"); !slices.Equal(got, []string{"/x/pkg.test", "-test.run=^$"}) {
		t.Errorf("native: %q", got)
	}
	t.Setenv(EmulatorEnv, " qemu-aarch64  -cpu cortex-a72 ")
	want := []string{"qemu-aarch64", "-cpu", "cortex-a72", "/x/pkg.test", "-test.run=^$"}
	if got := Argv("/x/pkg.test", "-test.run=^$"); !slices.Equal(got, want) {
		t.Errorf("emulated: %q, want %q", got, want)
	}
	if cmd := Command("/x/pkg.test", "-test.run=^$"); !slices.Equal(cmd.Args, want) {
		t.Errorf("Command args %q, want %q", cmd.Args, want)
	}
}

// Package testexec starts the running test binary again, as a child
// process, also when that binary was built for another architecture and
// runs under a user-mode emulator.
//
// A test binary cross-compiled for arm64 or loong64 runs on an amd64
// machine as `qemu-aarch64 ./pkg.test`. Its own exec of itself (os.Args[0])
// fails with "exec format error" unless the kernel hands foreign
// executables to qemu (binfmt_misc), which CI containers often lack. With
// GMGATE_TEST_EMULATOR set to the emulator's command (for example
// "qemu-aarch64"; words separated by spaces), the children run through it.
// The emulator's CPU model travels in its own environment variable
// (QEMU_CPU), which children inherit. Host programs the tests run
// (openssl, redis-server, curl, sh) need no emulator and take none.
package testexec

import (
	"os"
	"os/exec"
	"strings"
)

// EmulatorEnv names the environment variable that holds the emulator
// command.
const EmulatorEnv = "GMGATE_TEST_EMULATOR"

// Emulator returns the emulator command words, or nil when the test
// binary runs natively.
func Emulator() []string {
	return strings.Fields(os.Getenv(EmulatorEnv))
}

// Emulated reports whether the test binary runs under an emulator
// (GMGATE_TEST_EMULATOR set). qemu-user differs from the kernel in a few
// things the tests can see: it answers reads of the process's own
// /proc/self/stat (and /proc/PID/stat with its own PID) itself, with zero
// CPU times; other processes' files are the kernel's.
func Emulated() bool { return len(Emulator()) > 0 }

// Argv returns the command line that runs the executable path (built for
// the architecture of this test binary) with args: through the emulator
// when one is set.
func Argv(path string, args ...string) []string {
	argv := append(Emulator(), path)
	return append(argv, args...)
}

// Command returns the command that runs the executable path (built for
// the architecture of this test binary) with args.
func Command(path string, args ...string) *exec.Cmd {
	argv := Argv(path, args...)
	return exec.Command(argv[0], argv[1:]...)
}

// Self returns the command that runs this test binary again with args.
func Self(args ...string) *exec.Cmd {
	return Command(os.Args[0], args...)
}

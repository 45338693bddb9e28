// Package softsdf builds and drives the software SDF device of
// accel/sdf/testdata/softsdf.c for tests and benchmarks: it compiles the
// library with gcc, and reaches the library's extra SOFTSDF_* functions
// (faults, latency, counters, the OpenSSL baseline) that the backend
// never calls; and it writes the key directory the library reads.
package softsdf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Build options.
const (
	// OmitSign leaves SDF_InternalSign_ECC out of the library.
	OmitSign = "-DSOFTSDF_OMIT_SIGN"
)

// DecryptVariant selects the SDF_InternalDecrypt_ECC prototype (1 to 4).
func DecryptVariant(v int) string { return fmt.Sprintf("-DSOFTSDF_DECRYPT_VARIANT=%d", v) }

// Stats are the library's counters.
type Stats struct {
	Signs, Decrypts                    uint64
	SessionsOpen, SessionsOpenMax      uint64
	SessionsOpened                     uint64
	CallsNow, CallsMax                 uint64
	BusyViolations                     uint64
	DeviceOpens, AccessGranted, Faults uint64
	AccessDenied                       uint64
	DeviceCloses                       uint64
}

// Available says why the library cannot be built here, or nil.
func Available() error {
	if _, err := exec.LookPath("gcc"); err != nil {
		return errors.New("gcc is not installed (apt-get install gcc)")
	}
	if _, err := os.Stat("/usr/include/openssl/evp.h"); err != nil {
		return errors.New("OpenSSL headers are not installed (apt-get install libssl-dev)")
	}
	return nil
}

// source returns the directory of softsdf.c.
func source() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate softsdf.c")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "accel", "sdf", "testdata"), nil
}

// Build compiles the library into dir/name with the given options and
// returns its path.
func Build(dir, name string, options ...string) (string, error) {
	if err := Available(); err != nil {
		return "", err
	}
	src, err := source()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	args := []string{"-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror"}
	args = append(args, options...)
	args = append(args, "-o", out, filepath.Join(src, "softsdf.c"),
		"-Wl,--version-script="+filepath.Join(src, "softsdf.map"), "-lcrypto", "-lpthread")
	cmd := exec.Command("gcc", args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// Copy copies a built library to dir/name: a copy is a separate instance
// with its own device when loaded, so tests do not share state.
func Copy(lib, dir, name string) (string, error) {
	b, err := os.ReadFile(lib)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	return out, os.WriteFile(out, b, 0o755)
}

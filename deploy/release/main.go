// Command release builds gmgate's release binaries from this source tree:
// static executables (CGO_ENABLED=0, -trimpath) for linux/amd64,
// linux/arm64 and linux/loong64 with the version stamped in, and a
// SHA256SUMS file in the format `sha256sum -c` reads. It needs nothing but
// the Go toolchain.
//
//	go run ./deploy/release v1.2.3             # into ./dist
//	go run ./deploy/release -o /tmp/out v1.2.3
//
// Each binary is named gmgate-VERSION-GOOS-GOARCH, and `gmgate version`
// prints VERSION (and the source revision, when built from a git clone).
// The amd64 binary targets the baseline x86-64 instruction set (GOAMD64=v1)
// and the arm64 one ARMv8.0 (GOARM64=v8.0), so they run on every server of
// their architecture; faster instructions are chosen at run time.
//
// Built without cgo, these binaries cannot load an SDF crypto card's
// library (sdf: keys); build on the target with cgo for that (see
// docs/operations.md, "Install").
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Target is one operating system and architecture to build for.
type Target struct{ GOOS, GOARCH string }

// Targets are the release platforms, in build order.
var Targets = []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"linux", "loong64"}}

const (
	mainPackage = "github.com/gmgate/gmgate/cmd/gmgate"
	versionVar  = "github.com/gmgate/gmgate/internal/version.Version"
)

var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// checkVersion refuses a version string that would not survive the
// linker flag, a file name, or a reader of `gmgate version`.
func checkVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("version %q: give up to 64 letters, digits and . _ + - starting with a letter or digit, e.g. v1.2.3", v)
	}
	return nil
}

// fileName is the name of the binary built for t.
func fileName(version string, t Target) string {
	return fmt.Sprintf("gmgate-%s-%s-%s", version, t.GOOS, t.GOARCH)
}

// buildEnv is the environment of the go build for t: the caller's, with
// the variables that decide what the binary is set here. GOFLAGS is set
// (an empty one would let go env -w settings through), so that no -tags
// or -race of the caller's reaches a release, and the source revision is
// recorded when the go command can read it.
func buildEnv(base []string, t Target) []string {
	set := map[string]string{
		"CGO_ENABLED": "0",
		"GOOS":        t.GOOS,
		"GOARCH":      t.GOARCH,
		"GOAMD64":     "v1",
		"GOARM64":     "v8.0",
		"GOFLAGS":     "-buildvcs=auto",
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOFLAGS"} {
		env = append(env, k+"="+set[k])
	}
	return env
}

// buildArgs are the go command's arguments that build t into out.
func buildArgs(version, out string) []string {
	return []string{"build", "-trimpath",
		"-ldflags", "-s -w -X " + versionVar + "=" + version,
		"-o", out, mainPackage}
}

// sumLine is the SHA256SUMS line of the file at path.
func sumLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)) + "  " + filepath.Base(path) + "\n", nil
}

func run(version, dir string, stdout, stderr io.Writer) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("the go command is not on PATH")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var sums strings.Builder
	for _, t := range Targets {
		out := filepath.Join(dir, fileName(version, t))
		fmt.Fprintf(stderr, "building %s/%s\n", t.GOOS, t.GOARCH)
		cmd := exec.Command(gobin, buildArgs(version, out)...)
		cmd.Env = buildEnv(os.Environ(), t)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s/%s: %w", t.GOOS, t.GOARCH, err)
		}
		line, err := sumLine(out)
		if err != nil {
			return err
		}
		sums.WriteString(line)
	}
	sumsFile := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(sumsFile, []byte(sums.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s", sums.String())
	fmt.Fprintf(stderr, "wrote %d binaries and SHA256SUMS to %s (check with: cd %s && sha256sum -c SHA256SUMS)\n", len(Targets), dir, dir)
	return nil
}

func main() {
	dir := flag.String("o", "dist", "directory to write the binaries and SHA256SUMS to")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./deploy/release [-o DIR] VERSION\n\n"+
			"Builds static gmgate binaries for linux/amd64, linux/arm64 and linux/loong64\n"+
			"with VERSION stamped in, and their SHA256SUMS.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *dir, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

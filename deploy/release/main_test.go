package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v1.2.3", "1.0.0-rc.1", "v2.0.0+build.7", "nightly_2026"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", "-v1", "v1 2", "v1/2", "v1;rm", "v1\n", ".hidden", strings.Repeat("9", 65)} {
		if err := checkVersion(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

// The caller's environment cannot change what a release is: cgo, the
// instruction-set level and GOFLAGS are set or cleared whatever they were.
func TestBuildEnvOverridesTheCallers(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/root", "CGO_ENABLED=1", "GOARCH=386", "GOAMD64=v4", "GOARM64=v9.0", "GOFLAGS=-race -tags=purego"}
	env := buildEnv(base, Target{"linux", "arm64"})
	want := []string{"PATH=/usr/bin", "HOME=/root", "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-buildvcs=auto"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q,\nwant %q", env, want)
	}
}

func TestBuildArgsStampTheVersion(t *testing.T) {
	args := strings.Join(buildArgs("v1.2.3", "/out/x"), " ")
	for _, want := range []string{"-trimpath", "-X github.com/gmgate/gmgate/internal/version.Version=v1.2.3", "-o /out/x", "github.com/gmgate/gmgate/cmd/gmgate"} {
		if !strings.Contains(args, want) {
			t.Errorf("go %s lacks %q", args, want)
		}
	}
}

// SHA256SUMS lines are what sha256sum -c reads: the hex digest, two
// spaces, the file name without its directory.
func TestSumLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gmgate-v1-linux-amd64")
	if err := os.WriteFile(path, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sumLine(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  gmgate-v1-linux-amd64\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A bad version is refused before anything is built or written.
func TestRunRefusesABadVersionFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var out, errs strings.Builder
	if err := run("v1 2", dir, &out, &errs); err == nil || !strings.Contains(err.Error(), `version "v1 2"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s made: %v", dir, err)
	}
}

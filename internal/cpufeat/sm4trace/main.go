// Command sm4trace prepares a test build that counts every SM4 block that
// gmsm computes with its lookup tables, so that tests can show that the
// paths gmgate keeps constant-time never reach them.
//
// It copies the gmsm module from the module cache into the directory
// given, renames there encryptBlockGo and expandKeyGo (the table-driven
// block and key schedule) in internal/sm4/block.go, adds a file that puts
// counting functions under the old names, and writes a go.work that builds
// this module with that copy:
//
//	go run ./internal/cpufeat/sm4trace /tmp/sm4trace
//	GOWORK=/tmp/sm4trace/go.work go test -tags gmgate_sm4trace \
//	    -run NoTableSM4 ./internal/cpufeat ./tlcp ./internal/sessionstore ./internal/keyenc
//
// Cross-built test binaries (GOARCH=arm64 go test -c ...) take the same
// environment and flags. Nothing of gmsm is kept in this repository: the
// copy is made from the module cache at each run. (go build -overlay
// would be lighter, but it refuses to replace files in the module cache.)
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const counting = `package sm4

import "sync/atomic"

// traceTableCalls counts the calls of the table-driven block and key
// schedule; gmgate's internal/cpufeat reads it (build tag
// gmgate_sm4trace).
var traceTableCalls atomic.Int64

func encryptBlockGo(xk *[rounds]uint32, dst, src []byte) {
	traceTableCalls.Add(1)
	encryptBlockGoTraced(xk, dst, src)
}

func expandKeyGo(key []byte, enc, dec *[rounds]uint32) {
	traceTableCalls.Add(1)
	expandKeyGoTraced(key, enc, dec)
}
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sm4trace DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sm4trace:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	gmsm, err := goList("-m", "-f", "{{.Dir}}", "github.com/emmansun/gmsm")
	if err != nil {
		return err
	}
	self, err := goList("-m", "-f", "{{.Dir}}")
	if err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	copyDir := filepath.Join(dir, "gmsm")
	if err := os.RemoveAll(copyDir); err != nil {
		return err
	}
	if err := os.CopyFS(copyDir, os.DirFS(gmsm)); err != nil {
		return err
	}
	// The module cache is read-only, and so is what CopyFS copied.
	if err := filepath.WalkDir(copyDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		return err
	}
	blockFile := filepath.Join(copyDir, "internal", "sm4", "block.go")
	src, err := os.ReadFile(blockFile)
	if err != nil {
		return err
	}
	text := string(src)
	for _, name := range []string{"encryptBlockGo", "expandKeyGo"} {
		decl := "func " + name + "("
		if strings.Count(text, decl) != 1 {
			return fmt.Errorf("%s does not declare %s once; gmsm changed, and the trace must change with it", blockFile, name)
		}
		text = strings.Replace(text, decl, "func "+name+"Traced(", 1)
	}
	if err := os.WriteFile(blockFile, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(copyDir, "internal", "sm4", "gmgate_trace.go"), []byte(counting), 0o644); err != nil {
		return err
	}
	goVersion, err := goList("-m", "-f", "{{.GoVersion}}")
	if err != nil {
		return err
	}
	work := filepath.Join(dir, "go.work")
	if err := os.WriteFile(work, []byte("go "+goVersion+"\n\nuse (\n\t"+self+"\n\t"+copyDir+"\n)\n"), 0o644); err != nil {
		return err
	}
	fmt.Println(work)
	return nil
}

func goList(args ...string) (string, error) {
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

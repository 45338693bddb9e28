package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/gmgate/gmgate/internal/testexec"
	"go.uber.org/goleak"
)

// childEnv makes the test binary act as the server child, as the gmgate
// binary does with its hidden subcommand.
const childEnv = "GMGATE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		if err := ServeChild(context.Background(), cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testLauncher starts this test binary as the server child.
func testLauncher(configJSON string) (*exec.Cmd, error) {
	cmd := testexec.Self("-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+configJSON)
	return cmd, nil
}

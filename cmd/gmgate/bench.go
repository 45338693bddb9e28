package main

import (
	"fmt"
	"io"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
)

// benchCmd groups the measuring commands.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure handshakes per core and GM crypto on this machine",
	Long: `Measure what this machine does with gmgate.

  gmgate bench handshake          TLCP beside TLS 1.2 and 1.3, against a server started here
  gmgate bench handshake --target gw.example.cn:443 --metrics http://gw:9180/metrics
  gmgate bench crypto             SM2, SM3, SM4 beside RSA, ECDSA, X25519, AES-GCM, SHA-256
  gmgate bench proxy              keep-alive requests through gmgate serve (--baseline OLD to compare)
  gmgate bench download           a large download through gmgate serve
  gmgate bench idle-conns         memory per idle keep-alive connection of gmgate serve`,
}

func init() {
	benchCmd.PersistentPreRunE = checkBenchFlags
	rootCmd.AddCommand(benchCmd)
}

// benchOutput holds the output flags both bench commands share.
type benchOutput struct {
	bench.Output
	quiet bool
}

// flags registers the output flags on cmd, whose chart file is checked
// before it runs, so that a run is never measured for nothing.
func (o *benchOutput) flags(cmd *cobra.Command) {
	cmd.PreRunE = func(*cobra.Command, []string) error { return o.Check() }
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "write the report as JSON")
	f.StringVar(&o.Chart, "chart", "", "also write a chart to this file (.svg, or .html with the table)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not show progress on stderr while measuring")
}

// progress returns where to show progress (nil with --quiet), having said
// what is coming.
func (o *benchOutput) progress(cmd *cobra.Command, what string) io.Writer {
	if o.quiet {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "measuring (%s; the report follows):\n", what)
	return cmd.ErrOrStderr()
}

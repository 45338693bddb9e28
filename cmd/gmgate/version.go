package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/internal/version"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/spf13/cobra"
)

func init() {
	var showCPU bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the gmgate version",
		Long: `Print the gmgate version, with the source revision it was built from when
the build recorded one, the Go release that built it, and the operating
system and architecture, on one line: "gmgate v1.2.3 (0123456789ab) go1.26.0
linux/amd64".

With --cpu, also print what gmgate found out about this CPU: the features
its dispatch uses, the implementation chosen for SM4-CBC, SM4-GCM, single
SM4 blocks, SM3 and SM2 and whether each is constant-time, the order in
which a server ranks the cipher suites when the configuration sets none,
and whether the process runs under emulation. GMGATE_CPU_DISABLE turns
features off (a comma-separated list: ` + strings.Join(cpufeat.Names(), ", ") + `), to
see or to use the path of a CPU without them.

Examples:
  gmgate version
  gmgate version --cpu
  GMGATE_CPU_DISABLE=avx512,gfni gmgate version --cpu    the path of a CPU without AVX-512 and GFNI
  gmgate version && /opt/gmgate-1.2/gmgate version    the two builds gmgate bench proxy --baseline compares`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "gmgate %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if showCPU {
				writeCPU(w)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&showCPU, "cpu", false, "also print the CPU features, the implementation of each GM primitive, whether it is constant-time, and the suite order")
	rootCmd.AddCommand(cmd)
}

// writeCPU prints the dispatch plan of this CPU.
func writeCPU(w io.Writer) {
	plan := cpufeat.Current()
	io.WriteString(w, plan.String())
	var names []string
	for _, id := range tlcp.DefaultCipherSuites {
		names = append(names, tlcp.CipherSuiteName(id))
	}
	fmt.Fprintf(w, "suite order:     %s (a server's, when the configuration lists no suites)\n", strings.Join(names, ", "))
	for _, warning := range platformWarnings() {
		fmt.Fprintln(w, "warning:", warning)
	}
}

// platformWarnings are what gmgate says about the CPU before anything
// else: a bad GMGATE_CPU_DISABLE, SM4 without a constant-time path,
// emulation.
func platformWarnings() []string {
	var ws []string
	if err := cpufeat.HostError(); err != nil {
		ws = append(ws, err.Error())
	}
	if s := cpufeat.Current().Warning(); s != "" {
		ws = append(ws, s)
	}
	if s := cpufeat.Emulation(); s != "" {
		ws = append(ws, s)
	}
	return ws
}

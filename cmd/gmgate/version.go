package main

import (
	"fmt"
	"runtime"

	"github.com/gmgate/gmgate/internal/version"
	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the gmgate version",
		Long: `Print the gmgate version, with the source revision it was built from when
the build recorded one, the Go release that built it, and the operating
system and architecture, on one line: "gmgate v1.2.3 (0123456789ab) go1.26.0
linux/amd64".

Examples:
  gmgate version
  gmgate version && /opt/gmgate-1.2/gmgate version    the two builds gmgate bench proxy --baseline compares`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "gmgate %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	})
}

package main

import (
	"os"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
)

func init() {
	var out benchOutput
	cmd := &cobra.Command{
		Use:   "report FILE.json",
		Short: "Show a saved gmgate bench report as a table, or chart it",
		Long: `Read a report that gmgate bench crypto, handshake, proxy, download or
idle-conns wrote with --json and show it as the table (or JSON), optionally
writing a chart of it (.svg, or .html with the table).

Examples:
  gmgate bench handshake --json > hs.json
  gmgate bench report hs.json --chart hs.html
  gmgate bench report proxy.json --chart proxy.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			rep, err := bench.ReadReport(f)
			if err != nil {
				return err
			}
			return out.Write(cmd.OutOrStdout(), rep)
		},
	}
	out.flags(cmd)
	cmd.Flags().Lookup("quiet").Hidden = true
	benchCmd.AddCommand(cmd)
}

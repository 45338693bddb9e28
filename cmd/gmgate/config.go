package main

import (
	"errors"
	"fmt"

	"github.com/gmgate/gmgate/config"
	"github.com/spf13/cobra"
)

func init() {
	configCmd := &cobra.Command{
		Use:   "config",
		Short: "Check a configuration file or show it with its defaults",
		Example: `  gmgate config check -c /etc/gmgate/gmgate.yaml
  gmgate config show -c /etc/gmgate/gmgate.yaml
  gmgate config show > gmgate.yaml        # a complete example to start from`,
	}

	var checkFile string
	checkCmd := &cobra.Command{
		Use:   "check",
		Short: "Report every problem in a configuration file, with its line",
		Example: `  gmgate config check -c /etc/gmgate/gmgate.yaml
  gmgate config check -c gmgate.yaml && systemctl reload gmgate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(checkFile)
			if err != nil {
				return configError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d listeners, %d upstreams)\n", checkFile, len(cfg.Listeners), len(cfg.Upstreams))
			return nil
		},
	}
	checkCmd.Flags().StringVarP(&checkFile, "config", "c", "gmgate.yaml", "configuration file")

	var showFile string
	showCmd := &cobra.Command{
		Use:   "show",
		Short: "Print a configuration with every default filled in",
		Long: `Print the configuration in -c with every default filled in, as gmgate
will run it. Without -c, print a complete commented example.`,
		Example: `  gmgate config show -c /etc/gmgate/gmgate.yaml
  gmgate config show > gmgate.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if showFile == "" {
				fmt.Fprint(cmd.OutOrStdout(), config.Example)
				return nil
			}
			cfg, err := config.Load(showFile)
			if err != nil {
				return configError(err)
			}
			out, err := config.Show(cfg)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	showCmd.Flags().StringVarP(&showFile, "config", "c", "", "configuration file (default: print an example)")

	configCmd.AddCommand(checkCmd, showCmd)
	rootCmd.AddCommand(configCmd)
}

// configError keeps a multi-problem report readable after the "gmgate:"
// prefix main adds.
func configError(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("\n%s", ce.Error())
	}
	return err
}

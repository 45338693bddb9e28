package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/proxy"
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

	var (
		checkFile  string
		offline    bool
		runningPID int
	)
	checkCmd := &cobra.Command{
		Use:   "check",
		Short: "Check a configuration as serve would start it: every problem, with its line",
		Long: `Check a configuration the way serve and a reload check it before they
bind anything: the file itself, then every certificate and key (passwords
and PINs from their variables and files, each key against its
certificate, the pair's shape, expiry, crypto cards opened and
self-tested), the suites against the keys, the ACME settings, the access
log, and whether each address can be bound. Every problem is listed with
its file, line, field and fix; the exit status is 0 exactly when serve
would start, and otherwise what serve would exit with: 78 (EX_CONFIG),
or 1 when every problem is an address in use or not on this machine.

Relative paths in the file are relative to the file's directory.

Before a reload, --pid names the running gmgate: the ports it listens on
count as free, since the reload keeps them. systemd passes it in
ExecReload as --pid $MAINPID. A --pid that names no process is an
error.

--offline checks what the files say rather than what this machine has:
no private key, crypto card, password or PIN is opened and no address is
bound; a key file that is not there is a warning, not a problem. For CI
pipelines that have the configuration and the certificates but not the
secrets.`,
		Example: `  gmgate config check -c /etc/gmgate/gmgate.yaml
  gmgate config check -c /etc/gmgate/gmgate.yaml --pid "$(pidof gmgate)" && systemctl reload gmgate
  gmgate config check -c deploy/gmgate.yaml --offline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("pid") {
				if err := checkRunningPID(runningPID); err != nil {
					return err
				}
			}
			cfg, res, err := proxy.CheckFile(checkFile, proxy.CheckOptions{Offline: offline, RunningPID: runningPID})
			out := cmd.OutOrStdout()
			if res != nil && len(res.Warnings) > 0 {
				fmt.Fprintf(out, "%s: %s:\n", checkFile, plural(len(res.Warnings), "warning"))
				for _, w := range res.Warnings {
					fmt.Fprintf(out, "  warning: %s\n", w)
				}
			}
			if err != nil {
				return configError(err)
			}
			fmt.Fprintf(out, "%s: ok (%s, %s)\n", checkFile, plural(len(cfg.Listeners), "listener"), plural(len(cfg.Upstreams), "upstream"))
			if len(res.Skipped) > 0 {
				fmt.Fprintf(out, "not checked (--offline): %s\n", strings.Join(res.Skipped, "; "))
			}
			return nil
		},
	}
	checkCmd.Flags().StringVarP(&checkFile, "config", "c", "gmgate.yaml", "configuration file")
	checkCmd.Flags().BoolVar(&offline, "offline", false, "open no key, card or secret and bind no address")
	checkCmd.Flags().IntVar(&runningPID, "pid", 0, "process ID of the running gmgate, whose ports count as free (checking before a reload)")

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

// checkRunningPID makes sure --pid names a process: a stale $MAINPID or
// a mistyped number would otherwise be ignored, and the running
// gateway's ports reported as in use.
func checkRunningPID(pid int) error {
	const find = "give the process ID of the running gmgate (`systemctl show -p MainPID --value gmgate`, or `pidof gmgate`), or leave --pid out when none runs"
	if pid <= 0 {
		return fmt.Errorf("--pid %d is not a process ID; %s", pid, find)
	}
	switch err := syscall.Kill(pid, 0); {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("--pid %d: no process has this ID; %s", pid, find)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("--pid %d: the process belongs to another user, whose listening ports this user cannot see; run config check as the user gmgate runs as, or as root", pid)
	case err != nil:
		return fmt.Errorf("--pid %d: %w", pid, err)
	}
	return nil
}

// configError returns the configuration's problems as they are: after
// the "gmgate:" prefix main adds, the report reads "gmgate: configuration
// has N problems:" with one indented line a problem.
func configError(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce
	}
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

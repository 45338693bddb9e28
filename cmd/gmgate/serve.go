package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gmgate/gmgate/internal/demo"
	"github.com/gmgate/gmgate/proxy"
	"github.com/spf13/cobra"
)

func init() {
	var (
		configFile string
		demoMode   bool
		upstream   string
		stateDir   string
		listen     string
		admin      string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway from a configuration file, or the demo",
		Long: `Run the gateway. With -c it serves the configuration file: SIGHUP (or a
change of the file) reloads it and the certificates without dropping
connections, SIGUSR1 (and SIGHUP) reopens the access log file after log
rotation, SIGTERM drains connections in flight and exits. Relative paths
in the file are relative to the file's directory. Under systemd
(Type=notify) it reports when it is ready, reloading and stopping.

With --demo it needs no file: it makes a local SM2 CA and certificates in
a state directory (reused on the next start), starts a small backend, and
serves TLCP and TLS on one port in front of it.

With --upstream URL it does the same in front of your own HTTP service,
and writes the configuration it runs to gmgate.yaml in the state
directory, so that the next step is gmgate serve -c. Once you edit that
file, --upstream no longer writes over it: serve it with -c.`,
		Example: `  gmgate serve --demo
  gmgate serve --upstream http://127.0.0.1:8080
  gmgate serve --upstream 127.0.0.1:8080 --listen :8443 --state ./gm
  gmgate serve --demo --state ./demo-state --listen 127.0.0.1:8443 --admin 127.0.0.1:9180
  gmgate serve -c /etc/gmgate/gmgate.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if demoMode || upstream != "" {
				if configFile != "" {
					return fmt.Errorf("--demo and --upstream make their own configuration; they do not go with -c")
				}
				if demoMode && upstream != "" {
					return fmt.Errorf("--demo fronts a built-in backend, --upstream your service: give one")
				}
				return demo.Run(ctx, demo.Options{
					StateDir:     stateDir,
					Listen:       listen,
					Admin:        admin,
					Upstream:     upstream,
					Out:          cmd.OutOrStdout(),
					ProbeCommand: selfCommand(),
				})
			}
			if configFile == "" {
				return fmt.Errorf("give a configuration file with -c FILE, or try --demo, or --upstream URL in front of your service")
			}
			if listen != "" || admin != "" || stateDir != "" {
				return fmt.Errorf("--listen, --admin and --state go with --demo or --upstream; set addresses in the configuration file")
			}
			reload := signalChan(syscall.SIGHUP)
			reopen := signalChan(syscall.SIGUSR1)
			err := proxy.Run(ctx, configFile, reload, proxy.Options{ReopenLogs: reopen})
			if err != nil {
				return configError(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&configFile, "config", "c", "", "configuration file")
	cmd.Flags().BoolVar(&demoMode, "demo", false, "run the demo: generated certificates and a built-in backend")
	cmd.Flags().StringVar(&upstream, "upstream", "", "quick start in front of your HTTP service (http://host:port, https://host:port or host:port): generated certificates, configuration written to the state directory")
	cmd.Flags().StringVar(&stateDir, "state", "", "with --demo or --upstream: the state directory (default: gmgate/demo under the user's configuration directory)")
	cmd.Flags().StringVar(&listen, "listen", "", "with --demo or --upstream: the gateway's address (default: a free loopback port)")
	cmd.Flags().StringVar(&admin, "admin", "", "with --demo or --upstream: the admin address for /metrics (default: a free loopback port)")
	rootCmd.AddCommand(cmd)
}

// signalChan delivers sig as a value on the returned channel; signals
// that arrive while one is pending are folded into it.
func signalChan(sig os.Signal) <-chan struct{} {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, sig)
	out := make(chan struct{}, 1)
	go func() {
		for range sigs {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

// selfCommand is how the user can run this program again: "go run
// ./cmd/gmgate" under go run, else the name it was started as.
func selfCommand() string {
	exe := os.Args[0]
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/gmgate"
	}
	return exe
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// selfCommandFunc runs this gmgate binary with args; tests replace it.
var selfCommandFunc = func() (bench.GatewayCommand, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable: %w", err)
	}
	return bench.BinaryCommand(exe), nil
}

// pinGatewayLoad binds the gateway benchmarks' load generator to the CPUs
// the gateways do not get; tests leave their process unbound.
var pinGatewayLoad = true

// gatewayFlags are the flags of the gateway benchmarks.
type gatewayFlags struct {
	baseline string
	json     bool
	quiet    bool
	opts     bench.GatewayOptions
}

func (g *gatewayFlags) register(f *pflag.FlagSet, rounds int) {
	f.StringVar(&g.baseline, "baseline", "", "another gmgate binary to measure beside this one, interleaved (an older build)")
	f.IntVar(&g.opts.Rounds, "rounds", rounds, "measure every build this many times, in alternating order")
	f.IntVar(&g.opts.ServerCores, "server-cores", 1, "CPUs for each gateway; the load generator and the upstream get the others")
	f.BoolVar(&g.opts.AccessLog, "access-log", true, "let the gateways write their access log (to a file), as in production")
	f.BoolVar(&g.json, "json", false, "write the report as JSON")
	f.BoolVarP(&g.quiet, "quiet", "q", false, "do not show progress on stderr while measuring")
}

// gatewayOptions fills in the builds: this binary, and the baseline.
func (g *gatewayFlags) gatewayOptions(cmd *cobra.Command) (bench.GatewayOptions, error) {
	self, err := selfCommandFunc()
	if err != nil {
		return bench.GatewayOptions{}, err
	}
	exe, _ := os.Executable()
	opts := g.opts
	opts.Upstream = self
	opts.PinLoadGenerator = pinGatewayLoad
	opts.Builds = []bench.GatewayBuild{{Name: "this build", Path: exe, Command: self}}
	if g.baseline != "" {
		path, err := exec.LookPath(g.baseline)
		if err != nil {
			return bench.GatewayOptions{}, fmt.Errorf("--baseline: %w", err)
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		opts.Builds = append(opts.Builds, bench.GatewayBuild{Name: "baseline", Path: path, Command: bench.BinaryCommand(path)})
	}
	if !g.quiet {
		fmt.Fprintln(cmd.ErrOrStderr(), "measuring (one line per measurement; the report follows):")
		opts.Progress = cmd.ErrOrStderr()
	}
	return opts, nil
}

// run runs a gateway benchmark with the builds and options of the flags,
// stopping at an interrupt, and writes its report.
func (g *gatewayFlags) run(cmd *cobra.Command, measure func(context.Context, bench.GatewayOptions) (any, error)) error {
	opts, err := g.gatewayOptions(cmd)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	rep, err := measure(ctx, opts)
	if err != nil {
		return err
	}
	return bench.WriteGatewayReport(cmd.OutOrStdout(), rep, g.json)
}

func init() {
	var (
		gf   gatewayFlags
		opts bench.ProxyOptions
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Measure keep-alive HTTP requests through gmgate serve: server CPU per request, requests/s, added latency",
		Long: `Start gmgate serve in a child process, in front of an upstream HTTP server
in another, with TLCP (ECC_SM4_GCM_SM3 and ECC_SM4_CBC_SM3) and TLS
listeners, and load it with keep-alive clients that each send GET requests
back to back on one connection. For each protocol and number of clients it
reports requests/s, the gateway's CPU time per 1000 requests (from
/proc/PID/stat), p50 and p99 latency, and the latency added over sending
the same load straight to the upstream.

With --baseline, another gmgate binary (an older build) is measured the same
way, interleaved round by round, and the report compares the two.

Examples:
  gmgate bench proxy
  gmgate bench proxy --baseline /opt/gmgate-1.2/gmgate --rounds 5
  gmgate bench proxy --protocols tlcp-gcm --clients 64 -d 10s --json > proxy.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return gf.run(cmd, func(ctx context.Context, g bench.GatewayOptions) (any, error) {
				opts.GatewayOptions = g
				return bench.RunProxy(ctx, opts)
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Protocols, "protocols", nil, "listeners to load: tlcp-gcm, tlcp-cbc, tls (default all)")
	f.IntSliceVar(&opts.Clients, "clients", bench.DefaultClients, "numbers of keep-alive clients")
	f.DurationVarP(&opts.Duration, "duration", "d", bench.DefaultProxyDuration, "measured time per protocol, build and number of clients in a round")
	f.DurationVar(&opts.Warmup, "warmup", bench.DefaultProxyWarmup, "load before each measurement that is not counted; 0 for none")
	f.IntVar(&opts.Body, "body", bench.DefaultBody, "size of the upstream's responses in bytes")
	f.StringVar(&opts.ServerProfile, "server-profile", "", "write a CPU profile of this build's gateway for every measurement of it to this directory (admin.pprof; profiling costs a little CPU)")
	gf.register(f, 5)
	benchCmd.AddCommand(cmd)
}

func init() {
	var (
		gf   gatewayFlags
		opts bench.DownloadOptions
		mib  int64
	)
	cmd := &cobra.Command{
		Use:   "download",
		Short: "Measure a large download through gmgate serve (MB/s and server CPU per GB)",
		Long: `Start gmgate serve in a child process in front of an upstream HTTP server in
another, and download one large response through it on a new connection,
timed from the request to the last byte. ECC_SM4_CBC_SM3 by default.

With --baseline, another gmgate binary (an older build) is measured the same
way, interleaved round by round.

Examples:
  gmgate bench download
  gmgate bench download --baseline /opt/gmgate-1.2/gmgate --rounds 7
  gmgate bench download --protocol tlcp-gcm --size-mib 1024`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return gf.run(cmd, func(ctx context.Context, g bench.GatewayOptions) (any, error) {
				opts.GatewayOptions = g
				opts.Size = mib << 20
				return bench.RunDownload(ctx, opts)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Protocol, "protocol", "tlcp-cbc", "listener to download through: tlcp-cbc, tlcp-gcm or tls")
	f.Int64Var(&mib, "size-mib", bench.DefaultDownloadSize>>20, "size of each download in MiB")
	gf.register(f, 7)
	benchCmd.AddCommand(cmd)
}

func init() {
	var (
		gf   gatewayFlags
		opts bench.IdleOptions
	)
	cmd := &cobra.Command{
		Use:   "idle-conns",
		Short: "Measure the memory an idle keep-alive connection costs gmgate serve",
		Long: `Start gmgate serve in a child process in front of an upstream HTTP server,
open --conns connections, each with one GET request, leave them idle, and
report how much the gateway's resident memory (VmRSS) grew per connection.
Each build gets a new gateway process in every round.

With --baseline, another gmgate binary (an older build) is measured the same
way, interleaved round by round.

Examples:
  gmgate bench idle-conns
  gmgate bench idle-conns --baseline /opt/gmgate-1.2/gmgate --conns 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return gf.run(cmd, func(ctx context.Context, g bench.GatewayOptions) (any, error) {
				opts.GatewayOptions = g
				return bench.RunIdleConns(ctx, opts)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Protocol, "protocol", "tlcp-gcm", "listener the connections use: tlcp-gcm, tlcp-cbc or tls")
	f.IntVar(&opts.Conns, "conns", bench.DefaultIdleConns, "idle connections to open")
	f.DurationVar(&opts.Settle, "settle", bench.DefaultSettle, "how long connections stay idle before memory is read; 0 to read it at once")
	gf.register(f, 3)
	benchCmd.AddCommand(cmd)

	benchCmd.AddCommand(&cobra.Command{
		Use:    "upstream-child CONFIG",
		Short:  "Run the upstream of the gateway benchmarks (started by them)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.UpstreamChild(cmd.Context(), args[0], os.Stdin, os.Stdout)
		},
	})
}

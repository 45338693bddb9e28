package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
)

func init() {
	var (
		opts     bench.HandshakeOptions
		suites   string
		resume   float64
		baseline string
		out      benchOutput
	)
	cmd := &cobra.Command{
		Use:   "handshake",
		Short: "Measure TLCP and TLS handshakes per second, latency and handshakes per server CPU-second",
		Long: `Load a server with new connections, one handshake each, and report
handshakes/s, latency percentiles, errors by kind and handshakes per server
CPU-second (what one core of the server does).

Without --target, gmgate starts the server itself in a child process on
loopback, bound to --server-cores CPUs (GOMAXPROCS to match) with its own CPU
accounting, and binds the load generator to the other CPUs. With no --suite
it then compares ` + strings.ReplaceAll(bench.DefaultComparison, ",", ", ") + `
side by side.

With --target, the server's CPU time comes from --server-pid (any server on
this machine, gmgate or not: /proc/PID/stat, children included) or --metrics
(gmgate's process_cpu_seconds_total); without either there are no per
CPU-second figures. Rows are named after what was negotiated (TLS version,
key exchange group and the server certificate's key), not what was offered.
The run exits 1 when a scenario completed no handshake, and a scenario stops
after a second in which every connection failed. The report warns when the
server was not saturated or shared CPUs with the load generator.

--baseline BINARY measures another gmgate build's server beside this one's:
every round runs each scenario against both in turn (the order alternating),
and the report gives this build's handshakes per server CPU-second over the
baseline's, per round, with the median and spread.

Suites: ` + strings.Join(bench.ScenarioNames(), ", ") + `;
add +resumed to a suite for a run in which every connection resumes.

Examples:
  gmgate bench handshake
  gmgate bench handshake --suite ECC_SM4_GCM_SM3 --concurrency 256 --duration 30s
  gmgate bench handshake --suite ECDHE_SM4_GCM_SM3,TLS1.3-SM,TLS1.3-SM+resumed,TLS1.3-SM-MLKEM,TLS1.3 --rounds 3
  gmgate bench handshake --suite ECC_SM4_GCM_SM3 --resume 0.8 --http / --rate 500
  gmgate bench handshake --suite ECC_SM4_GCM_SM3,ECC_SM4_CBC_SM3 --rounds 7 -d 3s --baseline /opt/gmgate-old/gmgate
  gmgate bench handshake --suite ECC_SM4_GCM_SM3,TLS1.2 --server-profile prof && go tool pprof -top prof/ECC_SM4_GCM_SM3.cpu.pprof
  gmgate bench handshake --sign-cert s.crt --sign-key s.key --enc-cert e.crt --enc-key 'sdf:/opt/libsdf.so?index=2&key=enc&pin-env=SDF_PIN'
  gmgate bench handshake --target gw.example.cn:443 --metrics http://gw.example.cn:9180/metrics --peak 20000
  taskset -c 0 gmgate bench handshake --target 127.0.0.1:8443 --server-pid $(pgrep -o nginx) --suite TLS1.3,TLS1.2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if suites != "" || cmd.Flags().Changed("resume") {
				list := suites
				if list == "" {
					list = "ECC_SM4_GCM_SM3"
				}
				sc, err := bench.ParseScenarios(list, resume)
				if err != nil {
					return err
				}
				opts.Scenarios = sc
			}
			if baseline != "" {
				path, err := filepath.Abs(baseline)
				if err != nil {
					return err
				}
				if _, err := os.Stat(path); err != nil {
					return fmt.Errorf("--baseline: %w", err)
				}
				opts.Baseline = bench.BinaryLauncher(path, "bench", "serve-child")
				opts.BaselinePath = path
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			opts.Progress = out.progress(cmd, "one line per scenario")
			opts.PinLoadGenerator = true
			rep, err := bench.RunHandshake(ctx, opts)
			if rep != nil {
				if werr := out.Write(cmd.OutOrStdout(), rep); werr != nil && err == nil {
					err = werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&suites, "suite", "", "comma-separated suites to run (default: the comparison without --target, ECC_SM4_GCM_SM3 with it)")
	f.Float64Var(&resume, "resume", 0, "share of connections (0 to 1) that resume an earlier session (default: none)")
	f.StringVar(&baseline, "baseline", "", "another gmgate binary whose server to measure beside this one's, interleaved round by round (an older build)")
	f.StringVar(&opts.Target, "target", "", "host:port of a server to load instead of starting one")
	f.StringVar(&opts.MetricsURL, "metrics", "", "the target's Prometheus metrics URL, for its process_cpu_seconds_total")
	f.IntVar(&opts.ServerPID, "server-pid", 0, "process ID of a target on this machine, whose CPU time (children included) is read from /proc (default: none)")
	f.StringVar(&opts.ServerName, "server-name", "", "name to verify the server's certificate against (with --ca) and to send as HTTP Host")
	f.StringVar(&opts.CAFile, "ca", "", "PEM CA certificates to verify the server against (default: not verified)")
	f.IntVarP(&opts.Concurrency, "concurrency", "c", bench.DefaultConcurrency, "connections in flight")
	f.DurationVarP(&opts.Duration, "duration", "d", bench.DefaultHandshakeDuration, "measured time per suite")
	f.DurationVar(&opts.Warmup, "warmup", bench.DefaultHandshakeWarmup, "load before each measurement that is not counted; 0 for none")
	f.IntVar(&opts.Rounds, "rounds", 1, "run all suites this many times in turn and add up each suite's windows (steadier on a shared machine)")
	f.DurationVar(&opts.Timeout, "timeout", bench.DefaultHandshakeTimeout, "limit for each connection")
	f.Float64Var(&opts.Rate, "rate", 0, "at most this many new connections per second; 0 for no limit (default: as fast as they complete)")
	f.StringVar(&opts.HTTPPath, "http", "", "send one GET for this path on each connection and read the response (mixed workload)")
	f.IntVar(&opts.HTTPBody, "http-body", bench.DefaultHTTPBody, "size of the self-started server's responses in bytes")
	f.Float64Var(&opts.Peak, "peak", bench.DefaultPeak, "peak handshakes/s for the capacity lines; 0 for none")
	f.IntVar(&opts.ServerCores, "server-cores", 0, "CPUs for the self-started server (default 1); with --target, the CPUs the server has, for its busy share (default: from --server-pid)")
	f.StringVar(&opts.ServerProfileDir, "server-profile", "", "write a CPU profile of the self-started server's measured window per suite to this directory")
	f.StringVar(&opts.Identity.SignCert, "sign-cert", "", "self-started server: signing certificate (PEM, leaf first)")
	f.StringVar(&opts.Identity.SignKey, "sign-key", "", "self-started server: signing key reference (path, file:..., sdf:...)")
	f.StringVar(&opts.Identity.EncCert, "enc-cert", "", "self-started server: encryption certificate (PEM, leaf first)")
	f.StringVar(&opts.Identity.EncKey, "enc-key", "", "self-started server: encryption key reference (path, file:..., sdf:...)")
	out.flags(cmd)
	benchCmd.AddCommand(cmd)

	benchCmd.AddCommand(&cobra.Command{
		Use:    "serve-child CONFIG",
		Short:  "Run the server of gmgate bench handshake (started by it)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.ServeChild(cmd.Context(), args[0], os.Stdin, os.Stdout)
		},
	})
}

package main

import (
	"os"
	"os/signal"

	"github.com/gmgate/gmgate/internal/bench"
	"github.com/spf13/cobra"
)

func init() {
	var (
		opts bench.CryptoOptions
		out  benchOutput
	)
	cmd := &cobra.Command{
		Use:   "crypto",
		Short: "Per-core figures of SM2, SM3 and SM4 beside RSA, ECDSA, X25519, AES-GCM and SHA-256",
		Long: `Measure the GM primitives and their usual counterparts on one core.

One goroutine, pinned to one CPU, runs each operation in a loop of --duration
after a warm-up that is not counted. The CPU features and the code gmsm picks
for SM2, SM3 and SM4 on this machine are printed with the figures. Keys given
with --key (file:..., sdf:...) are measured through their accel backend.

Examples:
  gmgate bench crypto
  gmgate bench crypto --only sm2,sm4 --duration 2s
  gmgate bench crypto --key 'sdf:/opt/vendor/libsdf.so?index=2&key=sign&pin-env=SDF_PIN'
  gmgate bench crypto --json > crypto.json --chart crypto.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if !cmd.Flags().Changed("warmup") {
				opts.Warmup = bench.CryptoWarmup(opts.Duration)
			}
			if !cmd.Flags().Changed("cpu") {
				opts.CPU = -1
			}
			opts.Progress = out.progress(cmd, "figures as they come")
			rep, err := bench.RunCrypto(ctx, opts)
			if err != nil {
				return err
			}
			return out.Write(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", bench.DefaultCryptoDuration, "length of each timed loop")
	f.DurationVar(&opts.Warmup, "warmup", 0, "warm-up before each loop, not counted; 0 for none (default: a fifth of --duration, at most 200ms)")
	f.IntSliceVar(&opts.Sizes, "sizes", bench.DefaultSizes, "message sizes in bytes for the by-size figures, multiples of 16")
	f.IntVar(&opts.Retries, "retries", 2, "take a figure again up to this many times when another process shared the core; 0 to take each once")
	f.IntVar(&opts.CPU, "cpu", 0, "CPU to pin the measuring goroutine to (default: the last one this process may use)")
	f.StringSliceVar(&opts.Only, "only", nil, "measure only algorithms whose name contains one of these words (e.g. sm2,sm4)")
	f.StringArrayVar(&opts.Keys, "key", nil, "an SM2 key reference to measure through its accel backend (repeatable)")
	out.flags(cmd)
	benchCmd.AddCommand(cmd)
}

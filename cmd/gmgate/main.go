// Command gmgate is a TLCP (GB/T 38636-2020) reverse proxy: it terminates
// SM2 dual-certificate TLCP and TLS in front of services that speak plain
// HTTP, TLS or TCP.
//
// Each subcommand lives in its own file and registers itself on rootCmd in
// an init function.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gmgate/gmgate/config"
	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "gmgate",
	Short: "TLCP (GM-TLS) reverse proxy with SM2 dual certificates",
	Long: `gmgate terminates TLCP (GB/T 38636-2020, SM2/SM3/SM4) and TLS in front of
services that speak plain HTTP, TLS or TCP.

  gmgate serve --demo            run a demo gateway with generated SM2 certificates
  gmgate serve -c gmgate.yaml    run the gateway from a config file
  gmgate probe https://host/     connect with TLCP and show what was negotiated
  gmgate cert init-ca --out ca   start a local SM2 CA
  gmgate bench handshake         measure handshakes per second per core`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gmgate:", err)
		os.Exit(exitCode(err))
	}
}

// exitConfig is the exit status of a configuration that cannot serve as
// it is (sysexits' EX_CONFIG): a problem in the file, or a certificate,
// key, password or PIN it names. Starting again unchanged fails again,
// and with a crypto card each start offers the PIN again, so
// deploy/gmgate.service does not restart on it (RestartPreventExitStatus).
const exitConfig = 78

// exitCode is exitConfig for a configuration's problems, unless each may
// clear by itself (an address still in use), and for a configuration file
// that cannot be read (missing, a directory); 1 for any other error.
func exitCode(err error) int {
	var ce *config.Error
	if errors.As(err, &ce) && !ce.Transient() {
		return exitConfig
	}
	var fe *config.FileError
	if errors.As(err, &fe) {
		return exitConfig
	}
	return 1
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/spf13/cobra"
)

// defaultAdmin is the admin address health asks without -c or --admin:
// the port deploy/ and the image's example configurations give the admin
// listener, on loopback, which a listener on every address answers too.
const defaultAdmin = "127.0.0.1:9180"

func init() {
	var (
		admin, file string
		live        bool
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Ask a running gmgate whether it is ready, for container health checks",
		Long: `Ask the admin listener of a running gmgate for /readyz (with --live,
/healthz) and exit 0 when it answers 200, 1 otherwise: a container health
check that needs no curl or wget in the image (the Dockerfile's
HEALTHCHECK runs it).

/readyz answers 503 once the process drains for shutdown, so a container
that is stopping reports unhealthy; /healthz answers 200 as long as the
process runs.

The address is --admin, or admin.listen of the configuration given with
-c (a listener on every address, ":9180" or "0.0.0.0:9180", is asked on
loopback), or ` + defaultAdmin + `.`,
		Example: `  gmgate health
  gmgate health -c /etc/gmgate/gmgate.yaml
  gmgate health --admin 127.0.0.1:9180 --live`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if admin != "" && file != "" {
				return errors.New("give --admin or -c, not both")
			}
			addr := admin
			if file != "" {
				cfg, err := config.Load(file)
				if err != nil {
					// A health check fails with 1 whatever went wrong,
					// never with the configuration's 78.
					return errors.New(err.Error())
				}
				if addr, err = adminDialAddr(cfg.Admin.Listen); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
			}
			if addr == "" {
				addr = defaultAdmin
			}
			path := "/readyz"
			if live {
				path = "/healthz"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			answer, err := askAdmin(ctx, addr, path)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), answer)
			return nil
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "", "the admin listener's host:port (default "+defaultAdmin+")")
	cmd.Flags().StringVarP(&file, "config", "c", "", "take the admin address from this configuration file's admin.listen")
	cmd.Flags().BoolVar(&live, "live", false, "ask /healthz (the process runs) rather than /readyz (it takes connections)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	rootCmd.AddCommand(cmd)
}

// adminDialAddr is the address to reach an admin listener bound to
// listen at from this machine: its own, or loopback for a listener on
// every address.
func adminDialAddr(listen string) (string, error) {
	if listen == "off" {
		return "", errors.New(`admin.listen is "off", so there is nothing to ask; set it (such as 127.0.0.1:9180)`)
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("admin.listen %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}

// askAdmin GETs path from the admin listener at addr and returns the
// first line of a 200 answer; any other answer, or none, is an error
// that says what came back.
func askAdmin(ctx context.Context, addr, path string) (string, error) {
	url := "http://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{
		// The admin listener answers on its own; a redirect is not it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("%s did not answer in time", url)
		}
		return "", fmt.Errorf("cannot reach gmgate's admin listener at %s: %w; is gmgate running with admin.listen there? (give --admin or -c)", addr, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	answer, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s: %s", url, resp.Status, answer)
	}
	return answer, nil
}

// unwrapURLError drops the "Get URL:" that net/http puts around an
// error the message already places.
func unwrapURLError(err error) error {
	if ue, ok := err.(interface{ Unwrap() error }); ok && strings.HasPrefix(err.Error(), "Get ") {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

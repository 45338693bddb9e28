package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gmgate/gmgate/config"
)

// transport reaches the targets of one pool in the pool's scheme. The
// pool chooses the target, retries, counts failures and writes the
// metrics; the transport only connects and carries the bytes, so that
// health checks, retries and metrics work alike for every scheme. One
// small type per scheme implements it (transport_*.go).
type transport interface {
	// roundTrip sends an HTTP request to t and returns its response.
	roundTrip(req *http.Request, t *target) (*http.Response, error)
	// dialStream opens a byte stream to t, for TCP routes.
	dialStream(ctx context.Context, t *target) (net.Conn, error)
	// probe is the health check without a path: it connects to t (and
	// completes the handshake where the scheme has one) and hangs up.
	probe(ctx context.Context, t *target) error
	// closeIdle closes the connections kept for reuse.
	closeIdle()
}

// transportSettings are what every transport of a generation shares.
type transportSettings struct {
	timeouts config.Timeouts
	// maxResponseHeader bounds a target's response header.
	maxResponseHeader int
}

func (ts transportSettings) dialer() *net.Dialer {
	return &net.Dialer{Timeout: ts.timeouts.UpstreamConnect.D(), KeepAlive: 30 * time.Second}
}

// newTransport makes the transport of a pool's scheme.
func newTransport(scheme string, uc *config.Upstream, ts transportSettings) (transport, error) {
	switch scheme {
	case "http", "https":
		return newHTTPTransport(scheme, uc, ts)
	case "tcp":
		return newTCPTransport(ts), nil
	}
	return nil, fmt.Errorf("no transport for %s:// targets", scheme)
}

// connectProbe connects to addr with d and hangs up.
func connectProbe(ctx context.Context, d *net.Dialer, addr string) error {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

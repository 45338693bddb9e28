package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// tcpTransport reaches tcp:// targets: a plain TCP connection per client
// connection.
type tcpTransport struct {
	dialer *net.Dialer
}

func newTCPTransport(ts transportSettings) *tcpTransport {
	return &tcpTransport{dialer: ts.dialer()}
}

var errStreamOnly = errors.New("tcp:// targets take whole connections, not HTTP requests")

func (tr *tcpTransport) roundTrip(*http.Request, *Target, *Hooks) (*http.Response, error) {
	return nil, errStreamOnly
}

func (tr *tcpTransport) dialStream(ctx context.Context, t *Target) (net.Conn, error) {
	return tr.dialer.DialContext(ctx, "tcp", t.Addr)
}

func (tr *tcpTransport) probe(ctx context.Context, t *Target) error {
	return connectProbe(ctx, tr.dialer, t.Addr)
}

func (tr *tcpTransport) CloseIdle() {}

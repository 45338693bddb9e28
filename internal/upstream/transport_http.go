package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/h1client"
)

// httpTransport reaches http:// and https:// targets with HTTP/1.1 over
// TCP or TLS, keeping connections alive between requests, and h2c://
// targets (and https:// ones with http2) with HTTP/2 (transport_h2.go).
type HttpTransport struct {
	scheme string
	dialer *net.Dialer
	Http   *http.Transport
	// h1 carries the requests without a body to http:// targets.
	h1 *h1client.Client
	// http2 is set when requests may go over HTTP/2: to h2c:// targets,
	// and to https:// ones with http2 that choose h2.
	http2 bool
}

func newHTTPTransport(scheme string, uc *config.Upstream, ts transportSettings) (*HttpTransport, error) {
	tr := &HttpTransport{scheme: scheme, dialer: ts.dialer()}
	var tc *tls.Config
	if scheme == "https" {
		var err error
		if tc, err = TLSConfig(uc.TLS, ts.offline); err != nil {
			return nil, err
		}
	}
	tr.Http = ts.httpTransport()
	tr.Http.DialContext = ts.boundWrites(tr.dialer.DialContext)
	tr.Http.TLSClientConfig = tc
	tr.Http.TLSHandshakeTimeout = ts.timeouts.UpstreamConnect.D()
	setUpstreamProtocols(tr.Http, uc)
	tr.http2 = tr.Http.Protocols.HTTP2() || tr.Http.Protocols.UnencryptedHTTP2()
	if !tr.http2 {
		ts.boundConns(tr.Http)
	}
	if scheme == "http" {
		tr.h1 = h1client.New(h1client.Options{
			Dial:                   tr.dialer.DialContext,
			ResponseHeaderTimeout:  ts.timeouts.UpstreamResponse.D(),
			MaxResponseHeaderBytes: int64(ts.maxResponseHeader),
		})
	}
	return tr, nil
}

// upstreamTLSConfig is the TLS client configuration of c. Offline (a
// check), the client certificate is checked and its key reference read,
// but the key is not opened.
func TLSConfig(c *config.UpstreamTLS, offline bool) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c == nil {
		return tc, nil
	}
	tc.ServerName = c.ServerName
	tc.InsecureSkipVerify = c.InsecureSkipVerify
	if c.CA != "" {
		pem, err := certs.ReadCAFile("ca", c.CA)
		if err != nil {
			return nil, &config.FieldError{Field: "tls.ca", Err: err}
		}
		pool, err := certs.TLSCAPool(c.CA, pem)
		if err != nil {
			return nil, &config.FieldError{Field: "tls.ca", Err: err}
		}
		tc.RootCAs = pool
	}
	if c.Cert != "" {
		cert, _, err := certs.LoadTLSFiles(certs.TLSFiles{Cert: c.Cert, Key: c.Key}, certs.LoadOptions{Offline: offline})
		var fe *certs.FieldError
		if _, joined := err.(interface{ Unwrap() []error }); err != nil && !joined && errors.As(err, &fe) && fe.Field != "" {
			return nil, &config.FieldError{Field: "tls." + fe.Field, Err: fe.Err}
		}
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		if !offline {
			tc.Certificates = []tls.Certificate{*cert}
		}
	}
	return tc, nil
}

func (tr *HttpTransport) roundTrip(req *http.Request, t *Target, h *Hooks) (*http.Response, error) {
	req.URL.Scheme = urlScheme(tr.scheme)
	req.URL.Host = t.url.Host
	if tr.h1 != nil && tr.h1.Takes(req) {
		return tr.h1.RoundTripWith(req, t.Addr, h)
	}
	req = traced(req, h)
	if tr.http2 && !(tr.scheme == "https" && webSocket(req)) {
		req = withoutUpgrade(req)
	}
	return tr.Http.RoundTrip(req)
}

var errHTTPOnly = errors.New("http://, https:// and h2c:// targets take HTTP requests, not whole connections")

func (tr *HttpTransport) dialStream(context.Context, *Target) (net.Conn, error) {
	return nil, errHTTPOnly
}

// probe connects over TCP only, also for https:// targets.
func (tr *HttpTransport) probe(ctx context.Context, t *Target) error {
	return connectProbe(ctx, tr.dialer, t.Addr)
}

func (tr *HttpTransport) CloseIdle() {
	tr.Http.CloseIdleConnections()
	if tr.h1 != nil {
		tr.h1.CloseIdle()
	}
}

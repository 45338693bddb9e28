package proxy

import (
	"net/http"

	"github.com/gmgate/gmgate/config"
)

// HTTP/2 to upstreams: h2c:// targets speak HTTP/2 without TLS (prior
// knowledge, as gRPC servers do), and https:// targets with http2: true
// are offered h2 by ALPN. Both go through net/http's transport, whose
// HTTP/2 client passes trailers and streams request and response bodies
// both ways at once, so gRPC calls of every kind go through
// httputil.ReverseProxy unchanged.

// urlScheme is the scheme of the requests sent to a pool's targets.
func urlScheme(scheme string) string {
	if scheme == "h2c" {
		return "http"
	}
	return scheme
}

// setUpstreamProtocols chooses the HTTP versions a pool's transport
// speaks: HTTP/1.1 unless the pool's targets are h2c:// (HTTP/2 only) or
// https:// with http2 (HTTP/2 when the target takes it).
func setUpstreamProtocols(tr *http.Transport, uc *config.Upstream) {
	p := &http.Protocols{}
	switch scheme := uc.Scheme(); {
	case scheme == "h2c":
		p.SetUnencryptedHTTP2(true)
	case scheme == "https" && uc.HTTP2:
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	tr.Protocols = p
}

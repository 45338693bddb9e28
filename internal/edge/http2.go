package edge

import (
	"net/http"
	"time"

	"github.com/gmgate/gmgate/config"
)

// HTTP/2 from clients.
//
// Connections reach a listener's http.Server already handshaken, wrapped
// in httpConn, so net/http cannot see the ALPN choice that would make it
// serve HTTP/2 (it does so for a *tls.Conn only, and never for a
// tlcp.Conn). It serves HTTP/2 instead to a connection that opens with the
// HTTP/2 preface (its "unencrypted HTTP/2", which is what an established
// TLCP or TLS connection looks like from inside). Whether a connection may
// do so is decided at its handshake (handleConn: http2 on, and the client
// chose h2 by ALPN or chose nothing) and enforced by httpConn.Read.
//
// net/http's own HTTP/2 server is the one used: it is golang.org/x/net/
// http2 bundled with the Go release, with its protections (rapid reset:
// at most MaxConcurrentStreams handlers running and 4 times that many
// waiting, or the connection is closed with ENHANCE_YOUR_CALM; bounded
// CONTINUATION frames and control-frame queues), and it keeps HTTP/2
// connections inside the listener's http.Server, so that ConnContext,
// idle timeouts, graceful shutdown (GOAWAY, then waiting for the streams
// in flight) and the error log work for both versions alike.

// Limits of the HTTP/2 server, for each client connection.
const (
	// http2MaxStreams is how many requests a client connection may have
	// in flight at once (nginx: 128, Go: 250).
	HTTP2MaxStreams = 128
	// http2StreamWindow and http2ConnWindow bound what a client may send
	// ahead of gmgate reading it, per request and per connection.
	http2StreamWindow = 256 << 10
	http2ConnWindow   = 1 << 20
	// http2PingAfter is how long a connection with requests in flight
	// may stay silent before gmgate checks with a PING that the client is
	// still there; http2PingTimeout how long the answer may take.
	http2PingAfter   = 30 * time.Second
	http2PingTimeout = 15 * time.Second
)

// serverProtocols are the protocols a listener's HTTP server speaks:
// HTTP/1.1, and HTTP/2 to connections that start with its preface, on
// every listener. Each connection says whether it may (httpConn.Read):
// one of an http listener never, one of a tlcp, tls or auto listener as
// its handshake and the listener's http2 decided. So a reload that keeps
// a listener's socket and its HTTP server applies a change of protocol
// or of http2 to the connections that come next.
func ServerProtocols() *http.Protocols {
	p := &http.Protocols{}
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// http2Limits are the HTTP/2 server's limits. The header list is bounded
// by limits.max_header_bytes (http.Server.MaxHeaderBytes, which HTTP/2
// announces as SETTINGS_MAX_HEADER_LIST_SIZE), idle connections by
// timeouts.idle (IdleTimeout) and each write by timeouts.idle, as for
// HTTP/1.
func HTTP2Limits(cfg *config.Config) *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          HTTP2MaxStreams,
		MaxReceiveBufferPerStream:     http2StreamWindow,
		MaxReceiveBufferPerConnection: http2ConnWindow,
		SendPingTimeout:               http2PingAfter,
		PingTimeout:                   http2PingTimeout,
		WriteByteTimeout:              cfg.Timeouts.Idle.D(),
	}
}

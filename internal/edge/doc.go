// Package edge is the client side of a listener before any request is
// read: the first-record check that tells TLCP, TLS and plain HTTP apart
// (detect.go), reading the whole ClientHello within bounds of size and
// time (hello.go), the handshake limiter that a connection enters only
// with its whole ClientHello in (limiter.go), the PROXY protocol policy
// of trusted peers (proxyproto.go), and the established connections handed
// to a listener's HTTP server: HTTP/2 allowed or refused, writes bounded,
// idle keep-alive connections parked outside the server (httpconn.go,
// idle*.go, http2.go).
//
// It also runs the handshakes (handshake.go): the site table chooses the
// site by server name, and what the handshake negotiated becomes the
// connection's forward.ConnInfo.
//
// edge must not choose routes, dial upstreams or write the access log,
// must not log per byte, and must bound whatever a client can make it hold: bytes,
// time and goroutines.
package edge

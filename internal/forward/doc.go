// Package forward carries one request from client to upstream and its
// answer back, once route and upstream have chosen where it goes: what
// the handshake told of the client connection (ConnInfo, in each
// request's context), the header policy (spoofable and hop-by-hop
// headers removed, X-Forwarded-*, Forwarded and the session headers
// added), request bodies read under their deadline and minimum rate,
// framing checks of HTTP/1 request headers, the forwarding itself
// (Forwarder: the fast path for requests without a body or upgrade, and
// httputil.ReverseProxy for the rest) and the answers to requests that
// got no response (502, 503, 504, 499).
//
// forward must not choose the upstream (route does) or the target
// (upstream does), and must not let a client that stops reading or
// sending hold a connection, a goroutine or a buffer without end.
package forward

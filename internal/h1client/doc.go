// Package h1client is an HTTP/1.1 client for the requests without a body
// that a gateway forwards most (GET, HEAD, DELETE), over keep-alive
// connections of its own, on the caller's goroutine: the request is
// written and its response header read by the goroutine that calls
// RoundTrip, and the body read as that goroutine reads it. net/http's
// Transport, which carries every other request, runs two goroutines per
// connection and hands each request and response between them over
// channels, which for small keep-alive requests costs more than the rest
// of its work.
//
// # Contract
//
// For the requests it takes (Client.Takes: no body, no trailer, no
// Connection header, not Close, not CONNECT) the client behaves as a
// Transport with DisableCompression, MaxIdleConnsPerHost 256,
// IdleConnTimeout 90s and the same ResponseHeaderTimeout and
// MaxResponseHeaderBytes, except where this comment says otherwise. A
// differential test (differential_test.go) sends the same requests
// through both to an upstream that records the wire and compares what
// the upstream and the caller see; each difference below is a named
// exception there.
//
// On the wire: a request is the bytes net/http's Request.Write makes of
// it (Content-Length: 0 for POST, PUT and PATCH, the default User-Agent
// unless the caller set one, header fields sorted), after the same
// checks: a method that is not a token, an invalid header field name or
// value, or a control character in the URL fail the request before
// anything is dialed, and the error names the field, not its value.
//
// Responses are read with net/http's ReadResponse. The header is bounded
// by MaxResponseHeaderBytes (each informational header on its own) and by
// ResponseHeaderTimeout from the moment the request is written; nothing
// bounds the body as it streams. Informational responses other than 101
// go to the caller's Got1xx hook (RoundTripWith), or else to the
// request's httptrace Got1xxResponse hook, and are passed over;
// a 101 is returned with an empty body and its connection closed (this
// client makes no tunnels: upgrades go through the Transport).
//
// Retries: a request that fails on a connection that already carried a
// response is sent again, on another connection, when nothing of it was
// written, or when it may be sent twice (GET, HEAD, OPTIONS, TRACE, or an
// Idempotency-Key or X-Idempotency-Key header) and not one byte of the
// response came. A request that fails on a new connection, or after a
// byte of its response came, is never sent again. The retries end with
// the idle connections to the target: the last try is on a new one.
//
// Connection reuse: a connection goes back to the idle ones when its
// response was read to its end, the response did not say
// Connection: close (or was HTTP/1.0 without keep-alive), the target had
// not closed its side, the request's context was not canceled, and not
// one byte followed the response. The most recently used is reused
// first; at most 256 are kept per target address, none longer than 90
// seconds. A body closed before its end closes its connection; so does a
// canceled context (the error is then the context's), or a client
// connection gone away when the caller handed over its Watch: one
// registration per client connection, where an AfterFunc on the
// request's context is one per request.
//
// Closed and unsolicited: an idle connection is looked at without
// reading (a non-blocking MSG_PEEK) every second while idle, and before
// it is reused, except by a request that may be sent twice within a
// millisecond of its last response (a closed connection then costs a
// retry, and bytes sent in that moment would not have been seen by the
// Transport either). A connection the target closed is dropped; one with
// bytes nobody asked for is dropped, and the bytes logged through the
// standard logger as the Transport logs them ("Unsolicited response
// received on idle HTTP channel starting with ..."), unless they start a
// 408 response, which servers send before closing an idle connection.
// Where a connection cannot be looked at (not a syscall.Conn, or not a
// Unix system) it is taken as alive, and a closed one costs a retry.
//
// What it must not do: take bytes that arrived before a request was
// written for that request's response; send twice a request that may
// not be sent twice; keep a connection with unread bytes on it; start a
// goroutine per connection or per request (one timer sweeps the idle
// connections while there are any); grow with what a target sends
// beyond the header bound and one read buffer per connection; panic on
// anything a target sends.
//
// Differences from the Transport, on purpose: a failure to read the
// first byte of a response that is not retried says so ("net/http:
// Transport failed to read from server: EOF", which unwraps to EOF,
// where the Transport says "EOF"); a response header that cannot be read
// fails with the parser's error alone, without the Transport's
// "connection broken" in front; bytes found on an idle connection by a
// look are logged up to their first 64; a 101 is not a tunnel (above);
// and the requests the client does not take go through a Transport with
// connections of its own, so a mix of both kinds to one target uses a
// connection for each kind.
//
// It does not bound the connections to a target (the caller bounds the
// requests in flight), speak TLS itself (Options.Dial may), decompress,
// or carry request bodies, trailers or upgrades: Takes says no to those.
package h1client

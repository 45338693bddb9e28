// Package h1server serves the common requests of HTTP/1.1 client
// connections, GET and HEAD without a body, on one goroutine per
// connection, and hands a connection over to another server (net/http's)
// at the first request it does not take on.
//
// net/http's server reads each request through a textproto.Reader, runs
// a background read of the connection for every request (a goroutine
// wake-up, a read and its abort through a read deadline in the past),
// sets read deadlines several times per request, makes a context per
// request and clones the response header. For a gateway's keep-alive
// requests that is a fifth of its CPU. This server parses the request
// header from its read buffer into one string, starts a background read
// only once a handler has run WatchAfter (so that a client that goes
// away during a long exchange is still seen), keeps a read deadline
// while it is not too far off, and gives every request the connection's
// context.
//
// # Contract
//
// Requests: parseRequest takes HTTP/1.1 GET and HEAD with an origin-form
// target, exactly one valid Host, CRLF line ends, valid field names and
// values, and none of Content-Length, Transfer-Encoding, Expect, Upgrade,
// Trailer, Pragma, HTTP2-Settings or a Connection other than keep-alive,
// in a header of at most 4 KiB and 64 fields. Anything else, from its
// first byte, goes with the rest of the connection to Server.Fallback:
// bodies, 100-continue, upgrades, HTTP/1.0, the HTTP/2 preface, long or
// malformed headers (and their 400 and 431 answers). What it takes, it
// reads as net/http's server does (FuzzParseRequest holds the two to the
// same request), but for the request's context: the connection's, not
// canceled when the handler returns.
//
// Responses: what a handler does to the ResponseWriter reaches the client
// as the same bytes net/http's server sends (TestResponseMatchesNetHTTP),
// but for the Date, which is formatted once a second. The writer
// implements http.Flusher, http.Hijacker and the methods
// http.ResponseController calls.
//
// Connections: the wait for a request is bounded by IdleTimeout, its
// header by ReadHeaderTimeout from its first byte; a connection idle
// ParkAfter goes to Park. A handler that panics ends its connection (and
// is logged unless it panicked with http.ErrAbortHandler). Shutdown
// closes the connections waiting for a request and waits for the others
// to finish their response, which says Connection: close.
package h1server

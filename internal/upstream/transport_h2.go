package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"golang.org/x/net/http/httpguts"
)

// HTTP/2 to upstreams: h2c:// targets speak HTTP/2 without TLS (prior
// knowledge, as gRPC servers do), and https:// and tlcp:// targets with
// http2: true are offered h2 by ALPN (tlcp:// below). Both go through net/http's transport, whose
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
	if p.HTTP2() || p.UnencryptedHTTP2() {
		tr.HTTP2 = upstreamHTTP2()
	}
}

// Keep-alive PINGs on HTTP/2 connections to upstreams. A connection whose
// peer is gone without a word (a crashed host, a dropped NAT or firewall
// entry) would otherwise take requests, each answered 504 after
// timeouts.upstream_response, until TCP gives up (some 15 minutes); a
// PING that gets no answer closes it, and the next request opens a new
// one. net/http sends a PING only after upstreamPingAfter without a
// frame from the target, whether or not requests are in flight; a busy
// connection is never pinged.
//
// upstreamPingAfter is gRPC's shortest keep-alive interval: gRPC servers
// (grpc-go and grpc-java, with their default enforcement policy) count a
// PING that comes sooner than 5 minutes after the previous one, on a
// connection with streams (2 hours without), and at the third such
// answer GOAWAY ENHANCE_YOUR_CALM ("too_many_pings") and close the
// connection with its streams; only a HEADERS or DATA frame they send
// clears the count. A shorter interval would so cut gRPC streams that are quiet for
// a few intervals (a watch waiting for events), on all of a
// connection's calls. Idle connections are closed after 90 s, before
// they are ever pinged. Variables, for tests.
var (
	PingAfter   = 5 * time.Minute
	PingTimeout = 15 * time.Second
)

// upstreamHTTP2 is the configuration of net/http's HTTP/2 client to
// upstreams.
func upstreamHTTP2() *http.HTTP2Config {
	return &http.HTTP2Config{SendPingTimeout: PingAfter, PingTimeout: PingTimeout}
}

// withoutUpgrade is req without its offer to switch protocols (Upgrade,
// and the Connection header that names it), for a target spoken to in
// HTTP/2, which has no such switch (RFC 9113 §8.6): net/http's HTTP/2
// client refuses such a request before sending any of it, which would
// count against the target. The target answers the plain request it
// also is, as RFC 9110 §7.8 lets a server do; a WebSocket client then
// sees that its upgrade was not taken.
func withoutUpgrade(req *http.Request) *http.Request {
	if _, ok := req.Header["Upgrade"]; !ok {
		return req
	}
	r := *req
	r.Header = req.Header.Clone()
	delete(r.Header, "Upgrade")
	delete(r.Header, "Connection")
	return &r
}

// webSocket reports whether net/http's transport sends req over HTTP/1.1
// whatever the target speaks: a WebSocket upgrade.
func webSocket(req *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade") && strings.EqualFold(req.Header.Get("Upgrade"), "websocket")
}

// HTTP/2 over TLCP. With http2, the HTTP connections of a tlcp:// pool
// offer ALPN h2 and http/1.1, and each target is spoken to in the version
// its last handshake chose: HTTP/2 when it chose h2, HTTP/1.1 when it
// chose http/1.1 or nothing. ALPN is a ClientHello extension, which
// GmSSL 3.1 servers refuse, so it is offered only with http2, and never
// on the connections of TCP routes.
//
// net/http carries both versions but cannot see a TLCP connection's ALPN
// choice (it looks for a *tls.Conn), so there are two transports (in each
// connSet, connset.go): an HTTP/1.1 one, and one that speaks HTTP/2 on
// every connection it dials, multiplexing requests over one connection
// per target. A request
// goes to the transport of the version its target chose last (HTTP/2
// until the target has been heard). When a dial finds that the target
// chose the other version, its connection is kept for the other
// transport, and the request, of which nothing was sent, goes there.

// Versions a target chose at its last handshake.
const (
	versionUnknown = iota
	versionHTTP1
	versionHTTP2
)

// errOtherVersion is a dial's answer when the target chose the other HTTP
// version than the transport that dialed speaks.
var errOtherVersion = errors.New("the target chose the other HTTP version")

// spareLifetime is how long a connection kept for the other transport
// waits to be taken; it is taken at once unless that transport had an
// idle connection.
const spareLifetime = 5 * time.Second

// maxSpares bounds the connections kept for each version of a target
// (requests that start together each dial).
const maxSpares = 8

type tlcpHTTP2 struct {
	tr *tlcpTransport
	// configs offer h2 and http/1.1; by target address.
	configs map[string]*tlcp.Config
	targets map[string]*versionChoice
	log     *slog.Logger
}

// versionChoice is what a target chose at its last handshake.
type versionChoice struct {
	chosen atomic.Int32
}

func newTLCPHTTP2(tr *tlcpTransport, p *Pool) *tlcpHTTP2 {
	h := &tlcpHTTP2{tr: tr, configs: map[string]*tlcp.Config{}, targets: map[string]*versionChoice{}, log: p.log}
	for addr, cfg := range tr.configs {
		c := cfg.Clone()
		c.NextProtos = []string{"h2", "http/1.1"}
		h.configs[addr] = c
		h.targets[addr] = &versionChoice{}
	}
	return h
}

// transport is an HTTP/2-only transport whose connections come from dial.
func (h *tlcpHTTP2) transport(ts transportSettings, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := ts.httpTransport()
	// An https:// request whose connection comes from DialTLSContext and
	// is not a *tls.Conn is spoken to in HTTP/2 from the first byte when
	// HTTP/2 without TLS is the transport's only protocol: the connection
	// is secure already, and the target sees :scheme https.
	t.DialTLSContext = dial
	protocols := &http.Protocols{}
	protocols.SetUnencryptedHTTP2(true)
	t.Protocols = protocols
	// A connection from which nothing came for a while is checked with
	// a PING, and closed when the answer does not come.
	t.HTTP2 = upstreamHTTP2()
	return t
}

// roundTrip sends req over the version its target chose last, and over
// the other when a new connection finds that the target changed its
// choice.
func (h *tlcpHTTP2) roundTrip(set *connSet, req *http.Request, t *Target) (*http.Response, error) {
	vc := h.targets[t.Addr]
	if vc == nil {
		return nil, fmt.Errorf("%s is not a target of this upstream", t.Addr)
	}
	var body *keptBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &keptBody{body: req.Body}
		r := *req
		r.Body = body
		req = &r
	}
	var resp *http.Response
	var err error
	for range 2 {
		rt, out := set.h2, withoutUpgrade(req)
		if vc.chosen.Load() == versionHTTP1 {
			rt, out = set.http, req
		}
		resp, err = rt.RoundTrip(out)
		if !errors.Is(err, errOtherVersion) || body.wasRead() {
			break
		}
	}
	if err != nil {
		body.Release()
	}
	if errors.Is(err, errOtherVersion) {
		// The target changed its choice at two handshakes in a row.
		err = &stageError{stage: stageHandshake, err: err}
	}
	return resp, err
}

// dial gives a transport of set that speaks version a connection to the
// target at addr: one kept for it, or a new one if the target chooses
// version.
func (h *tlcpHTTP2) dial(ctx context.Context, set *connSet, addr string, version int32) (net.Conn, error) {
	vc := h.targets[addr]
	if vc == nil {
		return nil, fmt.Errorf("%s is not a target of this upstream", addr)
	}
	c := set.takeSpare(addr, version)
	if c == nil {
		var err error
		if c, err = h.tr.dialWith(ctx, addr, h.configs[addr]); err != nil {
			return nil, err
		}
		if chosen := h.learn(vc, addr, c); chosen != version {
			set.putSpare(addr, chosen, c)
			return nil, errOtherVersion
		}
	}
	return set.track(c)
}

// learn records the version the target chose on c, and logs a change.
func (h *tlcpHTTP2) learn(vc *versionChoice, addr string, c *tlcp.Conn) int32 {
	alpn := c.ConnectionState().NegotiatedProtocol
	chosen := int32(versionHTTP1)
	if alpn == "h2" {
		chosen = versionHTTP2
	}
	if vc.chosen.Swap(chosen) != chosen {
		if chosen == versionHTTP2 {
			h.log.Info("upstream target speaks HTTP/2", "target", addr)
		} else {
			if alpn == "" {
				alpn = "none"
			}
			h.log.Info("upstream target speaks HTTP/1.1: it did not choose h2", "target", addr, "alpn", alpn)
		}
	}
	return chosen
}

// probe is the health check without a path: a handshake as requests make
// it, offering HTTP/2.
func (h *tlcpHTTP2) probe(ctx context.Context, t *Target) error {
	c, err := h.tr.dialWith(ctx, t.Addr, h.configs[t.Addr])
	if err != nil {
		return err
	}
	h.learn(h.targets[t.Addr], t.Addr, c)
	return c.Close()
}

// keptBody is a request body handed to a transport that may give the
// request up before sending any of it (its dial found that the target
// chose the other version): until the body is first read, the
// transport's Close leaves it open, for the other transport to send.
type keptBody struct {
	body       io.ReadCloser
	read       atomic.Bool
	closeAsked atomic.Bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.body.Read(p)
}

func (b *keptBody) Close() error {
	if b.read.Load() {
		return b.body.Close()
	}
	b.closeAsked.Store(true)
	return nil
}

func (b *keptBody) wasRead() bool { return b != nil && b.read.Load() }

// release closes the body when a transport asked to and it was left
// open: a failed round trip closes its request's body.
func (b *keptBody) Release() {
	if b != nil && !b.read.Load() && b.closeAsked.Load() {
		b.body.Close()
	}
}

// refusedByTarget reports whether a handshake ended at the target's word:
// an alert it sent, or the connection closed.
func refusedByTarget(err error) bool {
	var ae *tlcp.AlertError
	if errors.As(err, &ae) {
		return ae.Remote
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// alpnRefusedError is a handshake that offered ALPN and that the target
// refused: its message says that ALPN may be why.
type alpnRefusedError struct{ err error }

func (e *alpnRefusedError) Error() string {
	return e.err.Error() + " (ALPN h2 was offered for http2: true; GmSSL 3.1 servers refuse it, turn http2 off for them)"
}

func (e *alpnRefusedError) Unwrap() error { return e.err }

package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// transport reaches the targets of one pool in the pool's scheme. The
// pool chooses the target, retries, counts failures and writes the
// metrics; the transport only connects and carries the bytes, so that
// health checks, retries and metrics work alike for every scheme. One
// small type per scheme implements it (transport_*.go).
type transport interface {
	// roundTrip sends an HTTP request to t and returns its response;
	// h (nil: none) are the caller's hooks.
	roundTrip(req *http.Request, t *Target, h *Hooks) (*http.Response, error)
	// dialStream opens a byte stream to t, for TCP routes.
	dialStream(ctx context.Context, t *Target) (net.Conn, error)
	// probe is the health check without a path: it connects to t (and
	// completes the handshake where the scheme has one) and hangs up.
	probe(ctx context.Context, t *Target) error
	// closeIdle closes the connections kept for reuse.
	CloseIdle()
}

// transportSettings are what every transport of a generation shares.
type transportSettings struct {
	timeouts config.Timeouts
	// maxResponseHeader bounds a target's response header.
	maxResponseHeader int
	// store holds the client identities of tlcp:// upstreams.
	store *certs.Store
	// offline builds for an offline check: no key is opened.
	offline bool
	// maxConnsPerTarget bounds the HTTP/1.1 connections kept to each
	// target (0: no bound), as the pool's slots bound the requests.
	maxConnsPerTarget int
}

// boundConns bounds the connections t keeps to each target, in use or
// idle, to ts.maxConnsPerTarget: the pool lets no more requests than
// that in flight, and the bound keeps a connection dialed while another
// came free from being kept too. For a transport that speaks HTTP/1.1
// only; over HTTP/2 the slots count streams.
func (ts transportSettings) boundConns(t *http.Transport) {
	if n := ts.maxConnsPerTarget; n > 0 {
		t.MaxConnsPerHost = n
		t.MaxIdleConnsPerHost = min(t.MaxIdleConnsPerHost, n)
	}
}

func (ts transportSettings) dialer() *net.Dialer {
	return &net.Dialer{Timeout: ts.timeouts.UpstreamConnect.D(), KeepAlive: 30 * time.Second}
}

// boundWrites returns dial with each write on the connections it makes
// bounded by timeouts.idle (see writeBoundConn).
func (ts transportSettings) boundWrites(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	timeout := ts.timeouts.Idle.D()
	if timeout <= 0 {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeBoundConn{Conn: c, bound: WriteBound{Timeout: timeout}}, nil
	}
}

// writeBoundConn is a connection to an upstream whose writes give up
// after timeout. An upstream that takes a request's header and stops
// reading its body (a hung process, its socket open) would otherwise
// hold the request and its client for ever: timeouts.upstream_response
// counts only once the request is written, and the client's body is not
// idle, gmgate being the one that does not read it. The same holds for
// what a client sends on an upgraded connection (WebSocket), which
// ReverseProxy writes to this connection.
type writeBoundConn struct {
	net.Conn
	bound WriteBound
}

func (c *writeBoundConn) Write(b []byte) (int, error) {
	c.bound.Arm(c.Conn)
	return c.Conn.Write(b)
}

// SetWriteDeadline passes a deadline on; the next Write sets its own
// again.
func (c *writeBoundConn) SetWriteDeadline(t time.Time) error {
	c.bound.Forget()
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline passes a deadline on; the next Write sets its own again.
func (c *writeBoundConn) SetDeadline(t time.Time) error {
	c.bound.Forget()
	return c.Conn.SetDeadline(t)
}

// httpTransport is the keep-alive HTTP/1.1 client every HTTP-carrying
// transport starts from; each sets how it dials.
func (ts transportSettings) httpTransport() *http.Transport {
	return &http.Transport{
		ResponseHeaderTimeout: ts.timeouts.UpstreamResponse.D(),
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   256,
		ExpectContinueTimeout: time.Second,
		// The client's Accept-Encoding goes through untouched.
		DisableCompression:     true,
		MaxResponseHeaderBytes: int64(ts.maxResponseHeader),
	}
}

// newTransport makes the transport of a pool's scheme for its targets.
func newTransport(p *Pool, uc *config.Upstream, ts transportSettings) (transport, error) {
	switch p.Scheme {
	case "http", "https", "h2c":
		return newHTTPTransport(p.Scheme, uc, ts)
	case "tlcp":
		return newTLCPTransport(p, uc, ts)
	case config.SchemeTLS13SM:
		return newTLS13SMTransport(p, uc, ts)
	case "tcp":
		return newTCPTransport(ts), nil
	}
	return nil, fmt.Errorf("no transport for %s:// targets", p.Scheme)
}

// certificateUser is a transport that takes a client identity from the
// certificate store of the generation in service.
type CertificateUser interface {
	UseStore(*certs.Store)
}

// The steps of reaching a target, as the logs and the
// gmgate_upstream_failures_total metric name them.
const (
	stageConnect   = "connect"
	stageHandshake = "handshake"
	stageRequest   = "request"
)

// stageError is a failure to reach a target, with the step that failed.
type stageError struct {
	stage string
	// proto names the handshake's protocol; TLCP when empty.
	proto string
	err   error
	// hint explains a failed TLCP handshake from what the client saw
	// (tlcphint), "" when the error says enough.
	hint string
}

func (e *stageError) Error() string {
	switch e.stage {
	case stageConnect:
		return "TCP connect failed: " + e.err.Error()
	case stageHandshake:
		proto := e.proto
		if proto == "" {
			proto = "TLCP"
		}
		return proto + " handshake failed: " + e.err.Error()
	}
	return "request failed: " + e.err.Error()
}

func (e *stageError) Unwrap() error { return e.err }

// upstreamFailure says which step of reaching a target failed (connect,
// handshake or request) and why, as a short label: for a handshake the
// alert sent or received when there was one.
func Failure(err error) (stage, reason string) {
	stage = stageRequest
	var se *stageError
	var op *net.OpError
	switch {
	case errors.As(err, &se):
		stage = se.stage
	case errors.As(err, &op) && op.Op == "dial":
		stage = stageConnect
	case tlsHandshakeFailure(err):
		stage = stageHandshake
	}
	var alert13 *tls13.AlertError
	if errors.As(err, &alert13) {
		dir := "sent"
		if alert13.Remote {
			dir = "received"
		}
		return stage, "alert_" + dir + "_" + strings.ReplaceAll(alert13.Alert.String(), " ", "_")
	}
	if dir, alert, ok := observe.HandshakeAlert(err); ok {
		return stage, "alert_" + dir + "_" + alert
	}
	var ne net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return stage, "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return stage, "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return stage, "unreachable"
	case errors.As(err, &dnsErr):
		return stage, "dns"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return stage, "closed"
	}
	return stage, "error"
}

// protoTLS13SM names the handshakes of tls13sm:// targets in errors.
const protoTLS13SM = "TLS 1.3 ShangMi"

// FailureHint explains the failures whose label alone may puzzle an
// operator; "" for the others. A tlcp:// target's refused handshake is
// explained from what the client saw (the profile in use, whether the
// target asked for a client certificate), in the words gmgate probe
// uses too (tlcphint). A hint names the settings of the target's scheme:
// tlcp.ca for tlcp://, tls13sm.ca for tls13sm://, tls.ca for https://.
func FailureHint(err error) string {
	var se *stageError
	if errors.As(err, &se) && se.hint != "" {
		return se.hint
	}
	stage, reason := Failure(err)
	if stage != stageHandshake {
		return ""
	}
	section := "tls" // https://: crypto/tls errors come without a stageError
	if se != nil {
		section = "tlcp"
		if se.proto == protoTLS13SM {
			section = config.SchemeTLS13SM
		}
	}
	switch reason {
	case "alert_received_protocol_version_not_supported":
		switch section {
		case "tlcp":
			return "the target refused TLCP 1.1; it may speak TLS only"
		case config.SchemeTLS13SM:
			return "the target refused TLS 1.3; it may speak TLCP (use a tlcp:// target) or an older TLS only"
		}
	case "alert_received_handshake_failure":
		if section == config.SchemeTLS13SM {
			return "the target shares no suite, signature scheme or group with tls13sm.suites and tls13sm.groups; it may not offer TLS 1.3 with the ShangMi suites (sm2sig_sm3, curveSM2)"
		}
	case "alert_sent_unexpected_message":
		if section == "tlcp" {
			return "the target's first answer was not TLCP; it may speak plain HTTP or another protocol"
		}
	case "alert_sent_unknown_certificate_authority", "alert_sent_bad_certificate", "alert_sent_expired_certificate", "alert_sent_unsupported_certificate":
		return "the target's certificate did not verify; check " + section + ".ca and " + section + ".server_name"
	case "timeout":
		return "the target took the connection but did not finish the handshake within timeouts.upstream_connect; it may speak another protocol on this port, or be overloaded"
	}
	return ""
}

// tlsHandshakeFailure reports whether an https:// target's error came from
// its TLS handshake.
func tlsHandshakeFailure(err error) bool {
	var alert tls.AlertError
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &alert) || errors.As(err, &rh) || errors.As(err, &cv) || strings.Contains(err.Error(), "TLS handshake timeout")
}

// connectProbe connects to addr with d and hangs up.
func connectProbe(ctx context.Context, d *net.Dialer, addr string) error {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

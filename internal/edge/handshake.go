package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp"
)

// acmeTLSProtocol is the ALPN protocol of TLS-ALPN-01 challenges
// (RFC 8737): a connection that negotiates it only proves control of the
// name and carries no data.
const ACMETLSProtocol = "acme-tls/1"

// errACMEChallenge ends a connection that answered a TLS-ALPN-01
// challenge.
var errACMEChallenge = errors.New("TLS-ALPN-01 challenge answered")

// outerTLCP is the configuration a listener's TLCP handshakes start with:
// it hands each ClientHello the configuration of its site, or ends the
// handshake with unrecognized_name.
func OuterTLCP(t *route.SiteTable) *tlcp.Config {
	return &tlcp.Config{
		GetConfigForClient: func(hi *tlcp.ClientHelloInfo) (*tlcp.Config, error) {
			if s := t.TLCP.LookupServerName(hi.ServerName); s != nil {
				return s.TLCP, nil
			}
			return nil, &tlcp.AlertError{Alert: tlcp.AlertUnrecognizedName, Err: &route.ErrUnknownSite{Name: hi.ServerName}}
		},
	}
}

// outerTLS is outerTLCP for TLS. crypto/tls sends unrecognized_name when
// the configuration it is given has no certificate: a name no site serves
// gets such a configuration, without session tickets, so that no ticket
// resumes there either.
func OuterTLS(t *route.SiteTable) *tls.Config {
	reject := &tls.Config{SessionTicketsDisabled: true, MinVersion: tls.VersionTLS12}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			if s := t.TLS.LookupServerName(hi.ServerName); s != nil {
				return s.TLS, nil
			}
			if rc, ok := hi.Conn.(*ReplayConn); ok {
				rc.RefusedName = hi.ServerName
			}
			return reject, nil
		},
	}
}

// errNoTLSCertificates is what crypto/tls returns for a configuration
// without certificates, that is, for a name no site serves.
const errNoTLSCertificates = "tls: no certificates configured"

// handshake runs the handshake of the listener's protocol, or on an auto
// listener of the protocol the client's first record header names (TLCP
// for a GM-capable TLS hello its site takes, gmcapable.go), and returns
// the site it was made for. info.protocol (and info.sni and info.site,
// once the ClientHello chose them) are set as far as they are known, even
// on failure.
// protocol is the listener's; tlsConf and tlcpConf start its handshakes
// (outerTLS, outerTLCP of sites).
func Handshake(ctx context.Context, protocol string, sites *route.SiteTable, tlsConf *tls.Config, tlcpConf *tlcp.Config, detected WireProtocol, c net.Conn) (*forward.ConnInfo, *route.Site, net.Conn, error) {
	info := &forward.ConnInfo{Protocol: "unknown"}
	gm := classifyGMCapable(protocol, sites, detected, c)
	gm.note(info)
	proto := WireTLCP
	switch protocol {
	case config.ProtocolTLS:
		proto = WireTLS
	case config.ProtocolAuto:
		proto = gm.wire(detected)
	}
	if proto == WireTLS {
		if h, ok := routeShangMi(sites, c); ok {
			return handshakeShangMi(ctx, h, c)
		}
		info.Protocol = "tls"
		tc := tls.Server(c, tlsConf)
		err := tc.HandshakeContext(ctx)
		cs := tc.ConnectionState()
		info.SNI = cs.ServerName
		site := sites.TLS.LookupServerName(cs.ServerName)
		if site != nil {
			info.Site = site.Name
		}
		if err != nil {
			if rc, ok := c.(*ReplayConn); ok && err.Error() == errNoTLSCertificates {
				info.SNI = rc.RefusedName
				err = &observe.SentAlertError{Alert: "unrecognized_name", Err: &route.ErrUnknownSite{Name: rc.RefusedName}}
			}
			return info, nil, nil, err
		}
		if cs.NegotiatedProtocol == ACMETLSProtocol {
			tc.Close()
			return info, nil, nil, errACMEChallenge
		}
		info.Protocol = observe.TLSVersionName(cs.Version)
		info.Suite = tls.CipherSuiteName(cs.CipherSuite)
		if cs.Version == tls.VersionTLS13 {
			info.Group = cs.CurveID.String()
		}
		info.ALPN = cs.NegotiatedProtocol
		info.Resumed = cs.DidResume
		info.SetTLSClient(cs)
		return info, site, tc, nil
	}
	info.Protocol = "tlcp"
	tc := gm.tlcpServer(c, tlcpConf)
	err := tc.HandshakeContext(ctx)
	cs := tc.ConnectionState()
	info.SNI = cs.ServerName
	site := sites.TLCP.LookupServerName(cs.ServerName)
	if site != nil {
		info.Site = site.Name
	}
	if err != nil {
		return info, nil, nil, err
	}
	info.Suite = tlcp.CipherSuiteName(cs.CipherSuite)
	info.ALPN = cs.NegotiatedProtocol
	info.Resumed = cs.DidResume
	info.SetTLCPClient(cs)
	return info, site, tc, nil
}

// handshakeResult labels a failed handshake for the metrics: the alert
// when there is one, else what kind of failure it was.
func HandshakeResult(err error) string {
	if dir, alert, ok := observe.HandshakeAlert(err); ok {
		return "alert_" + dir + "_" + alert
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrNotHandshake):
		return "not_tlcp_or_tls"
	case errors.Is(err, ErrPlainHTTP):
		return "plain_http"
	case errors.Is(err, errACMEChallenge):
		return "acme_challenge"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return "client_closed"
	}
	return "error"
}

// HandshakeFailed counts a failed handshake and logs it at info, a few
// lines a second per listener: the client, what it spoke, the alert sent
// or received and the cause. A client that closed without sending a byte
// (a port probe, a load balancer's TCP check) is logged at debug only.
// log takes the debug line, failLog the rate-limited ones.
func HandshakeFailed(log *slog.Logger, failLog *observe.RateLimitedLog, m *observe.Metrics, listener string, client net.Addr, info *forward.ConnInfo, err error, d time.Duration) {
	result := HandshakeResult(err)
	m.Handshake(info.Protocol, "none", info.Site, result, d)
	attrs := []slog.Attr{
		slog.String("listener", listener),
		slog.String("client", forward.AddrString(client)),
		slog.String("protocol", info.Protocol),
		slog.String("result", result),
	}
	if info.SNI != "" {
		attrs = append(attrs, slog.String("sni", info.SNI))
	}
	if info.Site != "" {
		attrs = append(attrs, slog.String("site", info.Site))
	}
	if dir, alert, ok := observe.HandshakeAlert(err); ok {
		attrs = append(attrs, slog.String("alert_"+dir, alert))
	}
	if info.GMCapableHello != "" {
		attrs = append(attrs, slog.String("gm_capable_tls_hello", info.GMCapableHello))
	}
	attrs = append(attrs, slog.String("cause", err.Error()), slog.Float64("duration_ms", observe.Millis(d)))
	switch {
	case errors.Is(err, io.EOF):
		log.LogAttrs(context.Background(), slog.LevelDebug, "connection closed before a ClientHello", attrs...)
		return
	case errors.Is(err, errACMEChallenge):
		log.LogAttrs(context.Background(), slog.LevelDebug, "ACME TLS-ALPN challenge answered", attrs...)
		return
	}
	failLog.Log("handshake failed", attrs...)
}

package edge

import (
	"net"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp"
)

// GM-capable TLS clients. 360 Secure Browser's GM mode, and browsers
// built like it, first send an ordinary TLS ClientHello that lists TLCP
// suites among its TLS suites, to say that they can speak TLCP. The first
// record header alone would send it to crypto/tls on an auto listener; on
// listeners that speak TLCP, the site the hello's server name chooses
// decides instead (gm_capable_tls_clients): TLCP, answered by
// tlcp.ServerForTLSHello, or TLS as before (refused with
// handshake_failure on a tlcp listener, so that the browser retries in
// TLCP). docs/protocol.md, "GM-capable TLS clients", gives the facts.

// What a GM-capable TLS hello got: the outcome label of
// gmgate_gm_capable_tls_hellos_total.
const (
	GMCapableTLCP    = "tlcp"
	GMCapableTLS     = "tls"
	GMCapableRefused = "refused"
)

// gmCapableChoice is what a listener does with a connection's ClientHello
// when it is a GM-capable TLS hello; the zero value, for any other hello,
// changes nothing.
type gmCapableChoice struct {
	// outcome is GMCapableTLCP, GMCapableTLS or GMCapableRefused; "" when
	// the hello is not a GM-capable TLS hello.
	outcome string
}

// classifyGMCapable looks at the ClientHello a connection is about to
// replay (c is the ReplayConn that holds it) when it came in TLS records
// to a listener that speaks TLCP (protocol tlcp or auto), and decides
// what it gets. It only reads the bytes already read: a hello the parser
// refuses is left to the handshake, which refuses it too.
func classifyGMCapable(protocol string, sites *route.SiteTable, detected WireProtocol, c net.Conn) gmCapableChoice {
	if detected != WireTLS || protocol == config.ProtocolTLS {
		return gmCapableChoice{}
	}
	rc, ok := c.(*ReplayConn)
	if !ok || len(rc.Prefix) == 0 {
		return gmCapableChoice{}
	}
	hello, err := tlcp.ParseTLSClientHello(rc.Prefix)
	if err != nil {
		return gmCapableChoice{}
	}
	return chooseGMCapable(protocol, sites, hello)
}

// chooseGMCapable decides for a parsed hello: TLCP when it is GM-capable
// and the TLCP site its server name chooses (as for a TLCP hello: the
// default site for a name no site lists) says tlcp; otherwise TLS, or on
// a tlcp listener the refusal tlcp.Server sends such a hello.
func chooseGMCapable(protocol string, sites *route.SiteTable, hello *tlcp.TLSClientHello) gmCapableChoice {
	if !hello.GMCapable() || protocol == config.ProtocolTLS {
		return gmCapableChoice{}
	}
	site := sites.TLCP.LookupServerName(hello.ServerName)
	switch {
	case site != nil && site.TLCP != nil && site.GMCapableTLCP:
		return gmCapableChoice{outcome: GMCapableTLCP}
	case protocol == config.ProtocolTLCP:
		return gmCapableChoice{outcome: GMCapableRefused}
	}
	return gmCapableChoice{outcome: GMCapableTLS}
}

// wire is the protocol the handshake speaks: TLCP for a hello answered in
// TLCP, else what the first record named.
func (ch gmCapableChoice) wire(detected WireProtocol) WireProtocol {
	if ch.outcome == GMCapableTLCP {
		return WireTLCP
	}
	return detected
}

// tlcpServer returns the TLCP side of c: one that takes the TLS-form
// hello when it is to be answered in TLCP, else tlcp.Server, which
// refuses a TLS hello (handshake_failure when it offers TLCP suites).
func (ch gmCapableChoice) tlcpServer(c net.Conn, conf *tlcp.Config) *tlcp.Conn {
	if ch.outcome == GMCapableTLCP {
		return tlcp.ServerForTLSHello(c, conf)
	}
	return tlcp.Server(c, conf)
}

// note records the outcome on the connection's info, for the metric and
// the logs.
func (ch gmCapableChoice) note(info *forward.ConnInfo) {
	info.GMCapableHello = ch.outcome
}

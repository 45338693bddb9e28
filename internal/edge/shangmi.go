package edge

import (
	"context"
	"net"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// TLS 1.3 with the ShangMi suites (RFC 8998) on tls and auto listeners.
//
// A TLS ClientHello that offers TLS 1.3, a ShangMi suite, sm2sig_sm3 and
// curveSM2 (or the hybrid) is served by package tls13 with the SM2
// identity of the site its server name selects (its tls.sm2, or on an
// auto listener its TLCP signing pair), when that site serves TLS 1.3
// ShangMi (route.Site.TLS13) and prefers it, or when the hello offers
// nothing crypto/tls could serve, or the site has no crypto/tls identity;
// every other TLS hello goes to crypto/tls as before. The decision reads
// the first flight ReadClientHello peeked and ReplayConn replays, so that
// neither stack has consumed a byte when it is made.

// ProtocolTLS13SM names TLS 1.3 ShangMi handshakes in metrics and access
// logs.
const ProtocolTLS13SM = "tls1.3-sm"

// shangMiHello is a TLS ClientHello that TLS 1.3 ShangMi serves: its
// server name and the site chosen for it (nil when no site serves the
// name and none is the default: the handshake ends with
// unrecognized_name).
type shangMiHello struct {
	serverName string
	site       *route.Site
}

// routeShangMi decides whether the TLS ClientHello that c replays goes to
// TLS 1.3 ShangMi, and for which site. ok false leaves it to crypto/tls.
func routeShangMi(sites *route.SiteTable, c net.Conn) (h shangMiHello, ok bool) {
	rc, isReplay := c.(*ReplayConn)
	if !isReplay || !sites.ServesTLS13 {
		return h, false
	}
	msg := helloMessage(rc.Prefix)
	if msg == nil || !offersShangMiSuite(msg) {
		return h, false
	}
	hello, parsed := tls13.ParseClientHello(msg)
	if !parsed || !tls13.OffersShangMi(hello) {
		return h, false
	}
	h.serverName = hello.ServerName
	// The site the name selects among all the listener's sites, as a
	// request's Host does: a name whose site has no SM2 identity stays
	// with that site's crypto/tls rather than reaching another site's.
	site := sites.All.LookupServerName(hello.ServerName)
	switch {
	case site == nil:
		// A client that offers only ShangMi learns that the name is
		// unknown in its own protocol; crypto/tls answers the others so.
		return h, tls13.OffersOnlyShangMi(hello)
	case site.TLS13 == nil:
		return h, false
	case site.TLS13Preferred, site.TLS == nil, tls13.OffersOnlyShangMi(hello):
		h.site = site
		return h, true
	}
	return h, false
}

// offersShangMiSuite reports whether a ClientHello message lists a
// ShangMi suite (TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3): a look at its cipher
// suites alone, so that the hellos of other clients (nearly all) are not
// parsed twice. A hello too short to say is not one.
func offersShangMiSuite(msg []byte) bool {
	at := 4 + 2 + 32 // header, legacy_version, random
	if len(msg) <= at {
		return false
	}
	at += 1 + int(msg[at]) // legacy_session_id
	if len(msg) < at+2 {
		return false
	}
	n := int(msg[at])<<8 | int(msg[at+1])
	suites := msg[at+2:]
	if n > len(suites) {
		return false
	}
	for i := 0; i+1 < n; i += 2 {
		if id := uint16(suites[i])<<8 | uint16(suites[i+1]); id == tls13.TLS_SM4_GCM_SM3 || id == tls13.TLS_SM4_CCM_SM3 {
			return true
		}
	}
	return false
}

// refuseShangMi is the configuration of a ShangMi handshake for a name no
// site serves: it ends at the ClientHello with unrecognized_name.
var refuseShangMi = &tls13.Config{
	SessionTicketsDisabled: true,
	GetConfigForClient: func(hi *tls13.ClientHelloInfo) (*tls13.Config, error) {
		return nil, &tls13.AlertError{Alert: tls13.AlertUnrecognizedName, Err: &route.ErrUnknownSite{Name: hi.ServerName}}
	},
}

// handshakeShangMi runs a TLS 1.3 ShangMi server handshake for h.
func handshakeShangMi(ctx context.Context, h shangMiHello, c net.Conn) (*forward.ConnInfo, *route.Site, net.Conn, error) {
	info := &forward.ConnInfo{Protocol: ProtocolTLS13SM, SNI: h.serverName}
	conf := refuseShangMi
	if h.site != nil {
		info.Site = h.site.Name
		conf = h.site.TLS13
	}
	tc := tls13.Server(c, conf)
	err := tc.HandshakeContext(ctx)
	if err != nil {
		return info, nil, nil, err
	}
	cs := tc.ConnectionState()
	info.Suite = tls13.CipherSuiteName(cs.CipherSuite)
	info.Group = cs.Group.String()
	info.ALPN = cs.NegotiatedProtocol
	info.Resumed = cs.DidResume
	info.SetTLS13Client(cs)
	return info, h.site, tc, nil
}

// helloMessage returns the handshake message that the records of a first
// flight carry (ReadClientHello checked them: handshake records, the
// first message a ClientHello of bounded length), or nil when prefix
// does not hold a whole one. A message in one record is returned in
// place; one split across records is joined into a new slice.
func helloMessage(prefix []byte) []byte {
	var joined []byte
	want := -1
	for rest := prefix; len(rest) >= RecordHeaderLen; {
		n := int(rest[3])<<8 | int(rest[4])
		if rest[0] != RecordTypeHandshake || n > len(rest)-RecordHeaderLen {
			return nil
		}
		frag := rest[RecordHeaderLen : RecordHeaderLen+n]
		rest = rest[RecordHeaderLen+n:]
		if joined == nil && want < 0 && len(frag) >= 4 {
			want = 4 + (int(frag[1])<<16 | int(frag[2])<<8 | int(frag[3]))
			if want > 4+maxClientHello {
				return nil
			}
			if len(frag) >= want {
				return frag[:want]
			}
		}
		joined = append(joined, frag...)
		if want < 0 && len(joined) >= 4 {
			want = 4 + (int(joined[1])<<16 | int(joined[2])<<8 | int(joined[3]))
			if want > 4+maxClientHello {
				return nil
			}
		}
		if want >= 0 && len(joined) >= want {
			return joined[:want]
		}
	}
	return nil
}

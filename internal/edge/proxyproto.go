package edge

import (
	"net"
	"net/netip"

	"github.com/gmgate/gmgate/config"
	proxyproto "github.com/pires/go-proxyproto"
)

// proxiedConn is a connection that began with a PROXY header. It
// half-closes as its socket does (proxyproto.Conn cannot), so that
// half-closes pass through TCP mode behind a load balancer too.
type ProxiedConn struct {
	*proxyproto.Conn
	// Socket is the socket under the PROXY header.
	Socket interface{ CloseWrite() error }
}

func (c ProxiedConn) CloseWrite() error { return c.Socket.CloseWrite() }

// proxyPolicy decides per peer: trusted peers may (or must) send a PROXY
// header; a header from anyone else is refused.
func ProxyPolicy(pp *config.ProxyProtocol, peer net.Addr) proxyproto.Policy {
	ap, err := netip.ParseAddrPort(peer.String())
	if err == nil {
		ip := ap.Addr().Unmap()
		for _, t := range pp.Trusted {
			if pfx, err := netip.ParsePrefix(t); err == nil && pfx.Contains(ip) {
				return trustedPolicy(pp)
			}
			if a, err := netip.ParseAddr(t); err == nil && a.Unmap() == ip {
				return trustedPolicy(pp)
			}
		}
	}
	return proxyproto.REJECT
}

func trustedPolicy(pp *config.ProxyProtocol) proxyproto.Policy {
	if pp.Required {
		return proxyproto.REQUIRE
	}
	return proxyproto.USE
}

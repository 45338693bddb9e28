package edge

import (
	"net"
	"net/netip"
	"time"

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

// ReadProxyHeader reads the PROXY header of a connection under policy pp
// (from a trusted peer, as pp requires; refused from any other), within
// deadline and at most timeout for the header itself. It returns the
// connection to go on with and the client address the header names, or
// the peer's address and the error that refuses the connection.
func ReadProxyHeader(c net.Conn, pp *config.ProxyProtocol, deadline time.Time, timeout time.Duration) (net.Conn, net.Addr, error) {
	client := c.RemoteAddr()
	pc := proxyproto.NewConn(c, proxyproto.WithPolicy(ProxyPolicy(pp, client)), proxyproto.SetReadHeaderTimeout(timeout))
	_ = pc.SetDeadline(deadline)
	if pc.ProxyHeader() == nil {
		if _, err := pc.Read(nil); err != nil {
			return c, client, err
		}
	}
	var under interface{ CloseWrite() error } = noCloseWrite{}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		under = cw
	}
	return ProxiedConn{Conn: pc, Socket: under}, pc.RemoteAddr(), nil
}

// noCloseWrite stands in for a socket that cannot half-close.
type noCloseWrite struct{}

func (noCloseWrite) CloseWrite() error { return nil }

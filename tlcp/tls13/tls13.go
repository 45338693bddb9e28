package tls13

import (
	"context"
	"net"
	"time"
)

// Server returns a server-side connection over conn; the handshake runs on
// the first Read, Write or HandshakeContext.
func Server(conn net.Conn, config *Config) *Conn {
	c := &Conn{conn: conn, config: config}
	c.handshakeFn = c.serverHandshake
	return c
}

// Client returns a client-side connection over conn. config must set
// ServerName or InsecureSkipVerify.
func Client(conn net.Conn, config *Config) *Conn {
	c := &Conn{conn: conn, config: config, isClient: true}
	c.handshakeFn = c.clientHandshake
	return c
}

type listener struct {
	net.Listener
	config *Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Server(c, l.config), nil
}

// NewListener returns a listener whose connections are server
// connections over inner's.
func NewListener(inner net.Listener, config *Config) net.Listener {
	return &listener{Listener: inner, config: config}
}

// Dialer dials connections and runs the client handshake on them.
type Dialer struct {
	NetDialer *net.Dialer
	Config    *Config
}

// DialContext dials addr and completes the handshake within ctx. Without
// Config.ServerName, the host of addr is the name checked.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := d.NetDialer
	if nd == nil {
		nd = &net.Dialer{Timeout: 30 * time.Second}
	}
	raw, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := d.Config
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = hostnameForVerify(addr)
	}
	c := Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

// Dial connects to addr and runs the handshake.
func Dial(network, addr string, config *Config) (*Conn, error) {
	c, err := (&Dialer{Config: config}).DialContext(context.Background(), network, addr)
	if err != nil {
		return nil, err
	}
	return c.(*Conn), nil
}

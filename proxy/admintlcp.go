package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gmgate/gmgate/internal/admin"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/tlcp"
)

// The admin listener speaks TLS (admin.cert), TLCP (admin.tlcp), or both
// on one port, each connection what its first record says, as an auto
// listener decides (edge.DetectProtocol).

// adminTLCPConfig serves the admin listener's TLCP from the generation
// in service, as adminTLSConfig does TLS.
func (s *Server) adminTLCPConfig(started *tlcp.Config) *tlcp.Config {
	return &tlcp.Config{GetConfigForClient: func(*tlcp.ClientHelloInfo) (*tlcp.Config, error) {
		if as := s.adminSettings.Load(); as != nil && as.tlcp != nil {
			return as.tlcp, nil
		}
		return started, nil
	}}
}

// adminConnContext lets the admin API see the verified client
// certificate of a TLCP connection, which net/http does not know (it
// fills Request.TLS for crypto/tls connections only).
func adminConnContext(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*tlcp.Conn)
	if !ok {
		return ctx
	}
	return admin.WithVerifiedPeer(ctx, func() string {
		cs := tc.ConnectionState()
		if !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return ""
		}
		return cs.VerifiedChains[0][0].Subject.String()
	})
}

// Bounds of the admin listener's protocol detection: connections whose
// first record header has not come within adminDetectTimeout are
// closed, and at most adminMaxDetecting wait for theirs at once (more
// are closed as they come).
const (
	adminDetectTimeout = 10 * time.Second
	adminMaxDetecting  = 64
)

// adminAutoListener hands out *tls.Conn and *tlcp.Conn by the first
// record of each connection. Accept does not wait for a client to
// speak: each new connection is read on a goroutine of its own.
type adminAutoListener struct {
	net.Listener
	tls  *tls.Config
	tlcp *tlcp.Config

	conns     chan net.Conn
	errs      chan error
	detecting chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// waiting are the connections being read, closed by Close.
	mu      sync.Mutex
	waiting map[net.Conn]struct{}
}

func newAdminAutoListener(inner net.Listener, tlsConf *tls.Config, tlcpConf *tlcp.Config) *adminAutoListener {
	l := &adminAutoListener{Listener: inner, tls: tlsConf, tlcp: tlcpConf,
		conns: make(chan net.Conn), errs: make(chan error), detecting: make(chan struct{}, adminMaxDetecting), done: make(chan struct{}),
		waiting: map[net.Conn]struct{}{}}
	go l.acceptLoop()
	return l
}

func (l *adminAutoListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case l.detecting <- struct{}{}:
			go l.detect(c)
		default:
			c.Close()
		}
	}
}

// detect reads the first record header and wraps the connection in the
// protocol it names; anything else (plain HTTP, garbage, silence) is
// closed.
func (l *adminAutoListener) detect(c net.Conn) {
	defer func() { <-l.detecting }()
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		c.Close()
		return
	default:
	}
	l.waiting[c] = struct{}{}
	l.mu.Unlock()
	hdr := make([]byte, edge.RecordHeaderLen)
	_ = c.SetReadDeadline(time.Now().Add(adminDetectTimeout))
	_, err := io.ReadFull(c, hdr)
	l.mu.Lock()
	delete(l.waiting, c)
	l.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	proto, err := edge.DetectProtocol(hdr)
	if err != nil {
		c.Close()
		return
	}
	replay := &edge.ReplayConn{Conn: c, Prefix: hdr}
	var conn net.Conn
	if proto == edge.WireTLCP {
		conn = tlcp.Server(replay, l.tlcp)
	} else {
		conn = tls.Server(replay, l.tls)
	}
	select {
	case l.conns <- conn:
	case <-l.done:
		c.Close()
	}
}

func (l *adminAutoListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections still being read.
func (l *adminAutoListener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.waiting {
			c.Close()
		}
		l.mu.Unlock()
	})
	return l.Listener.Close()
}

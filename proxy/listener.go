package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/h1server"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
)

// listenerState is what a listener serves with; a reload swaps it, and
// connections keep the state they were accepted with until their
// handshake is done.
type listenerState struct {
	name     string
	protocol string
	// sites are the listener's identities and routes; tlcp and tls are
	// the configurations its handshakes start with, which hand each
	// client the configuration of its site (site.go).
	sites *route.SiteTable
	tlcp  *tlcp.Config
	tls   *tls.Config
	// http2 offers HTTP/2 (ALPN h2).
	http2         bool
	proxyProtocol *config.ProxyProtocol
	maxConns      int64
	handshake     time.Duration
	clientHello   time.Duration
	idle          time.Duration
	requestBody   time.Duration
	// requestBodyMinRate is timeouts.request_body_min_rate.
	requestBodyMinRate int64
	upstreamDial       time.Duration
	handshakes         *edge.HandshakeLimiter
	// plain is set on http listeners.
	plain *plainHTTP
}

// runningListener is a bound socket with the HTTP servers that serve its
// established connections: HTTP/1.1 connections go to h1Srv, which
// serves their common requests (body-less GET and HEAD) on one
// goroutine per connection and hands a connection over to httpSrv
// (net/http's) at the first request it does not take on; HTTP/2
// connections go to httpSrv at once.
type runningListener struct {
	name      string
	listen    string
	ln        net.Listener
	state     atomic.Pointer[listenerState]
	active    atomic.Int64
	h1Srv     *h1server.Server
	httpSrv   *http.Server
	httpConns *edge.ConnListener
	// fullConns feeds httpSrv.
	fullConns *edge.ConnListener
	// failLog writes the listener's handshake failures, a few a second.
	failLog *observe.RateLimitedLog
	// connsActive is the listener's gmgate_connections_active.
	connsActive prometheus.Gauge
}

func (s *Server) bind(lc config.Listener, gen *generation) (*runningListener, error) {
	ln, err := listen(gen.cfg, lc)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
	}
	rl := &runningListener{name: lc.Name, listen: lc.Listen, ln: ln,
		failLog:     observe.NewRateLimitedLog(s.log, slog.LevelInfo, "handshake failures not logged", "listener", lc.Name),
		connsActive: s.metrics.ConnsActive.WithLabelValues(lc.Name)}
	rl.state.Store(gen.states[lc.Name])
	rl.httpConns = edge.NewConnListener(ln.Addr())
	rl.fullConns = edge.NewConnListener(ln.Addr())
	handler := &httpHandler{srv: s, listener: rl}
	connContext := func(ctx context.Context, c net.Conn) context.Context {
		if hc, ok := c.(*edge.HTTPConn); ok {
			return hc.Context(ctx)
		}
		return ctx
	}
	rl.h1Srv = &h1server.Server{
		Handler:           handler,
		ReadHeaderTimeout: gen.cfg.Timeouts.ReadHeader.D(),
		IdleTimeout:       gen.cfg.Timeouts.Idle.D(),
		ErrorLog:          s.stdErrorLog,
		ConnContext:       connContext,
		Fallback:          rl.fullConns.HandOff,
		Park:              edge.Park,
		ParkAfter:         edge.IdleParkAfter,
	}
	rl.httpSrv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: gen.cfg.Timeouts.ReadHeader.D(),
		IdleTimeout:       gen.cfg.Timeouts.Idle.D(),
		MaxHeaderBytes:    gen.cfg.Limits.MaxHeaderBytes,
		Protocols:         edge.ServerProtocols(),
		HTTP2:             edge.HTTP2Limits(gen.cfg),
		ErrorLog:          s.stdErrorLog,
		ConnContext:       connContext,
		ConnState:         edge.HTTPConnState,
	}
	return rl, nil
}

func (s *Server) serve(rl *runningListener) {
	go func() { _ = rl.httpSrv.Serve(rl.fullConns) }()
	go func() { _ = rl.h1Srv.Serve(rl.httpConns) }()
	s.acceptWG.Add(1)
	go s.acceptLoop(rl)
}

// stopListener retires a listener a reload removed; called with s.mu
// held.
func (s *Server) stopListener(rl *runningListener, grace time.Duration) {
	rl.ln.Close()
	s.retired = append(s.retired, rl)
	s.retiring.Add(1)
	go func() {
		defer s.retiring.Done()
		// Its connections finish on their own time, up to grace; no new
		// one is accepted. Those still open then are closed, as at
		// shutdown: HTTP connections with a request in flight, and the
		// upgraded (WebSocket) and TCP-mode ones, which the HTTP server
		// does not wait for.
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		rl.shutdownHTTP(ctx)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for rl.active.Load() > 0 && ctx.Err() == nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		if rl.active.Load() > 0 {
			rl.closeHTTP()
			n := s.closeConns(rl)
			s.log.Warn("removed listener: closed connections still open after timeouts.shutdown", "listener", rl.name, "connections", n)
		}
	}()
}

func (s *Server) acceptLoop(rl *runningListener) {
	defer s.acceptWG.Done()
	edge.AcceptLoop(rl.ln, s.log, rl.name, func(c net.Conn) func() {
		st := rl.state.Load()
		if rl.active.Add(1) > st.maxConns {
			rl.active.Add(-1)
			s.metrics.ConnsRefused.WithLabelValues(rl.name, "max_connections").Inc()
			c.Close()
			return nil
		}
		tc := s.track(c, rl)
		s.connWG.Add(1)
		return func() {
			defer s.connWG.Done()
			s.handleConn(rl, st, tc)
		}
	})
}

// trackedConn counts a client connection as active until it is closed,
// and lets Shutdown close it.
type trackedConn struct {
	net.Conn
	srv      *Server
	listener *runningListener
	once     sync.Once
}

func (s *Server) track(c net.Conn, rl *runningListener) *trackedConn {
	tc := &trackedConn{Conn: c, srv: s, listener: rl}
	s.connsMu.Lock()
	s.conns[tc] = struct{}{}
	s.connsMu.Unlock()
	rl.connsActive.Inc()
	return tc
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.srv.connsMu.Lock()
		delete(c.srv.conns, c)
		c.srv.connsMu.Unlock()
		c.listener.active.Add(-1)
		c.listener.connsActive.Dec()
	})
	return err
}

// CloseWrite half-closes when the connection underneath can.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handleConn runs one client connection from accept to hand-off: PROXY
// header, ClientHello, handshake slot, handshake, then HTTP or TCP.
//
// The slot is taken only once the whole ClientHello has arrived: until
// then the client alone sets the pace, and a slow or silent client must
// not keep others from their handshakes.
func (s *Server) handleConn(rl *runningListener, st *listenerState, tc *trackedConn) {
	var conn net.Conn = tc
	client := tc.RemoteAddr()
	accepted := time.Now()
	deadline := accepted.Add(st.handshake)
	helloDeadline := accepted.Add(min(st.clientHello, st.handshake))
	if pp := st.proxyProtocol; pp != nil {
		var err error
		if conn, client, err = edge.ReadProxyHeader(tc, pp, helloDeadline, st.clientHello); err != nil {
			s.metrics.ConnsRefused.WithLabelValues(rl.name, "proxy_protocol").Inc()
			s.log.Debug("PROXY header refused", "listener", rl.name, "client", client.String(), "cause", err.Error())
			tc.Close()
			return
		}
	} else {
		_ = tc.SetDeadline(helloDeadline)
	}

	switch st.protocol {
	case config.ProtocolHTTP:
		s.servePlainHTTP(rl, conn, client)
		return
	case config.ProtocolTCP:
		s.servePlainTCP(rl, st, conn, client)
		return
	}

	helloBuf := edge.HelloBufs.Get().(*[]byte)
	detected, hello, err := edge.ReadClientHello(conn, conn, *helloBuf)
	if err != nil {
		edge.HelloBufs.Put(helloBuf)
		s.handshakeFailed(rl, client, &forward.ConnInfo{Protocol: detected.String()}, err, time.Since(accepted))
		tc.Close()
		return
	}
	_ = conn.SetDeadline(deadline)
	conn = &edge.ReplayConn{Conn: conn, Prefix: hello, HelloBuf: helloBuf}

	// The connection's deadline bounds the handshake: every step that
	// waits does so in a read or a write. A context with the deadline
	// would add a timer, and a callback in the handshake to close the
	// connection, for the same end.
	if !st.handshakes.AcquireBy(deadline) {
		s.metrics.ConnsRefused.WithLabelValues(rl.name, "max_handshakes").Inc()
		s.metrics.Handshake(detected.String(), "none", "", "refused", 0)
		tc.Close()
		return
	}
	start := time.Now()
	info, site, established, err := edge.Handshake(context.Background(), st.protocol, st.sites, st.tls, st.tlcp, detected, conn)
	st.handshakes.Release()
	d := time.Since(start)
	s.metrics.GMCapableHello(rl.name, info.Site, info.GMCapableHello)
	if err != nil {
		s.handshakeFailed(rl, client, info, err, d)
		tc.Close()
		return
	}
	info.Listener = rl.name
	info.Client = client
	info.Handshake = d
	s.metrics.Handshake(info.Protocol, info.Suite, info.Site, "ok", d)
	if info.Resumed {
		s.metrics.Resumed(info.Protocol)
	}
	if info.Group != "" {
		s.metrics.HandshakeGroup(info.Protocol, info.Group)
	}
	_ = established.SetDeadline(time.Time{})

	// The handshake took the server name (lookupServerName): it is valid.
	sni, _ := hostname.ParseServerName(info.SNI)
	if rt := site.Router.Match(sni, "", true); rt != nil {
		s.fwd.TCP(rt.Upstream, established, info, st.upstreamDial, st.idle)
		return
	}
	// HTTP/2 is served to a client that chose h2 by ALPN, or that chose
	// nothing and starts with the HTTP/2 preface (prior knowledge); one
	// that chose http/1.1 speaks HTTP/1.1.
	h2 := st.http2 && (info.ALPN == "h2" || info.ALPN == "")
	hc := &edge.HTTPConn{Conn: established, Info: info, Bound: upstream.WriteBound{Timeout: st.idle}, Listener: rl.httpConns, H2Allowed: h2}
	hc.Sock = edge.ParkSocket(tc.Conn)
	to := rl.httpConns
	if h2 && info.ALPN == "h2" {
		to = rl.fullConns
	}
	if !to.Push(hc) {
		hc.Close()
	}
}

// shutdownHTTP stops the listener's HTTP servers taking connections,
// closes their idle ones and waits, until ctx ends, for the others.
func (rl *runningListener) shutdownHTTP(ctx context.Context) {
	rl.httpConns.Close()
	rl.fullConns.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = rl.h1Srv.Shutdown(ctx)
	}()
	_ = rl.httpSrv.Shutdown(ctx)
	wg.Wait()
}

// closeHTTP closes the connections of the listener's HTTP servers.
func (rl *runningListener) closeHTTP() {
	rl.h1Srv.Close()
	rl.httpSrv.Close()
}

// handshakeFailed counts and logs a failed handshake on rl.
func (s *Server) handshakeFailed(rl *runningListener, client net.Addr, info *forward.ConnInfo, err error, d time.Duration) {
	edge.HandshakeFailed(s.log, rl.failLog, s.metrics, rl.name, client, info, err, d)
	s.noteFailure(rl.name, client, info, err, d)
}

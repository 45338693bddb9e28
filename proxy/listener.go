package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/route"

	"github.com/gmgate/gmgate/internal/forward"

	"github.com/gmgate/gmgate/internal/upstream"

	"github.com/gmgate/gmgate/internal/edge"

	"github.com/gmgate/gmgate/internal/observe"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/connworkers"
	"github.com/gmgate/gmgate/tlcp"
	proxyproto "github.com/pires/go-proxyproto"
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

// runningListener is a bound socket with the HTTP server that serves its
// established connections.
type runningListener struct {
	name      string
	listen    string
	ln        net.Listener
	state     atomic.Pointer[listenerState]
	active    atomic.Int64
	httpSrv   *http.Server
	httpConns *connListener
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
	rl.httpConns = newConnListener(ln.Addr())
	rl.httpSrv = &http.Server{
		Handler:           &httpHandler{srv: s, listener: rl},
		ReadHeaderTimeout: gen.cfg.Timeouts.ReadHeader.D(),
		IdleTimeout:       gen.cfg.Timeouts.Idle.D(),
		MaxHeaderBytes:    gen.cfg.Limits.MaxHeaderBytes,
		Protocols:         serverProtocols(),
		HTTP2:             http2Limits(gen.cfg),
		ErrorLog:          s.stdErrorLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if hc, ok := c.(*httpConn); ok {
				return context.WithValue(ctx, forward.ConnInfoKey{}, hc.info)
			}
			return ctx
		},
		ConnState: httpConnState,
	}
	return rl, nil
}

func (s *Server) serve(rl *runningListener) {
	go func() { _ = rl.httpSrv.Serve(rl.httpConns) }()
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
		rl.httpConns.close()
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = rl.httpSrv.Shutdown(ctx)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for rl.active.Load() > 0 && ctx.Err() == nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		if rl.active.Load() > 0 {
			rl.httpSrv.Close()
			n := s.closeConns(rl)
			s.log.Warn("removed listener: closed connections still open after timeouts.shutdown", "listener", rl.name, "connections", n)
		}
	}()
}

func (s *Server) acceptLoop(rl *runningListener) {
	defer s.acceptWG.Done()
	// Connections run on goroutines kept for the next one: a new
	// goroutine's stack grows to a handshake's depth every time.
	workers := connworkers.New()
	defer workers.Stop()
	var delay time.Duration
	for {
		c, err := rl.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, as
			// net/http does, rather than spin.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			s.log.Warn("accept failed", "listener", rl.name, "cause", err.Error(), "retry_in", delay.String())
			time.Sleep(delay)
			continue
		}
		delay = 0
		st := rl.state.Load()
		if rl.active.Add(1) > st.maxConns {
			rl.active.Add(-1)
			s.metrics.ConnsRefused.WithLabelValues(rl.name, "max_connections").Inc()
			c.Close()
			continue
		}
		tc := s.track(c, rl)
		s.connWG.Add(1)
		workers.Run(func() {
			defer s.connWG.Done()
			s.handleConn(rl, st, tc)
		})
	}
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
		pc := proxyproto.NewConn(tc, proxyproto.WithPolicy(edge.ProxyPolicy(pp, client)), proxyproto.SetReadHeaderTimeout(st.clientHello))
		_ = pc.SetDeadline(helloDeadline)
		if pc.ProxyHeader() == nil {
			if _, err := pc.Read(nil); err != nil {
				s.metrics.ConnsRefused.WithLabelValues(rl.name, "proxy_protocol").Inc()
				s.log.Debug("PROXY header refused", "listener", rl.name, "client", client.String(), "cause", err.Error())
				tc.Close()
				return
			}
		}
		client = pc.RemoteAddr()
		conn = edge.ProxiedConn{Conn: pc, Socket: tc}
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

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if !st.handshakes.Acquire(ctx) {
		s.metrics.ConnsRefused.WithLabelValues(rl.name, "max_handshakes").Inc()
		s.metrics.Handshake(detected.String(), "none", "", "refused", 0)
		tc.Close()
		return
	}
	start := time.Now()
	info, site, established, err := s.handshake(ctx, st, detected, conn)
	st.handshakes.Release()
	d := time.Since(start)
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
	_ = established.SetDeadline(time.Time{})

	// The handshake took the server name (lookupServerName): it is valid.
	sni, _ := hostname.ParseServerName(info.SNI)
	if rt := site.Router.Match(sni, "", true); rt != nil {
		s.forwardTCP(st, rt.Upstream, established, info)
		return
	}
	// HTTP/2 is served to a client that chose h2 by ALPN, or that chose
	// nothing and starts with the HTTP/2 preface (prior knowledge); one
	// that chose http/1.1 speaks HTTP/1.1.
	h2 := st.http2 && (info.ALPN == "h2" || info.ALPN == "")
	hc := &httpConn{Conn: established, info: info, write: upstream.WriteBound{Timeout: st.idle}, listener: rl.httpConns, h2Allowed: h2}
	hc.sock = parkSocket(tc.Conn)
	if !rl.httpConns.push(hc) {
		hc.Close()
	}
}

// handshakeFailed counts a failed handshake and logs it at info, a few
// lines a second per listener: the client, what it spoke, the alert sent
// or received and the cause. A client that closed without sending a byte
// (a port probe, a load balancer's TCP check) is logged at debug only.
func (s *Server) handshakeFailed(rl *runningListener, client net.Addr, info *forward.ConnInfo, err error, d time.Duration) {
	result := handshakeResult(err)
	s.metrics.Handshake(info.Protocol, "none", info.Site, result, d)
	attrs := []slog.Attr{
		slog.String("listener", rl.name),
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
	attrs = append(attrs, slog.String("cause", err.Error()), slog.Float64("duration_ms", observe.Millis(d)))
	if errors.Is(err, io.EOF) {
		s.log.LogAttrs(context.Background(), slog.LevelDebug, "connection closed before a ClientHello", attrs...)
		return
	}
	rl.failLog.Log("handshake failed", attrs...)
}

// httpConn is an established connection handed to the HTTP server, with
// what its handshake negotiated for ConnContext.
type httpConn struct {
	net.Conn
	info *forward.ConnInfo
	// write bounds each write, so that a client that stops reading does
	// not hold its connection (and the upstream's) forever; a long
	// response to a client that keeps reading is not limited.
	write upstream.WriteBound
	// framing watches the request headers (read by one goroutine at a
	// time: net/http's) of HTTP/1.
	framing forward.FramingSniffer
	// listener takes the connection back after it was parked while idle
	// (idle.go).
	listener *connListener
	idleState
	// h2Allowed lets the client speak HTTP/2 (see handleConn); h2 is set
	// once its first bytes were the HTTP/2 preface.
	h2Allowed, h2 bool
	// start holds the first bytes read since the HTTP server took the
	// connection (up to 4), until started says whether they began the
	// HTTP/2 preface; refused is set once they did on a connection that
	// may not speak HTTP/2.
	start            [4]byte
	startLen         int
	started, refused bool
}

// http2Preface starts every HTTP/2 connection (RFC 9113 §3.4); no HTTP/1
// request starts with its first word.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// errHTTP2NotAllowed ends a connection that starts HTTP/2 without having
// chosen it.
var errHTTP2NotAllowed = errors.New("the client sent the HTTP/2 preface on a connection that did not choose h2")

func (c *httpConn) Read(b []byte) (int, error) {
	if c.refused {
		return 0, errHTTP2NotAllowed
	}
	n, err := c.Conn.Read(b)
	if !c.started && n > 0 && !c.checkStart(b[:n]) {
		return 0, errHTTP2NotAllowed
	}
	if !c.h2 && c.framing.Scan(b[:n]) {
		c.info.AmbiguousFraming.Store(true)
	}
	if c.idle {
		return c.idleRead(n, err)
	}
	return n, err
}

// checkStart watches the first bytes of the connection, b the latest
// read of them, and reports whether the connection may go on. The HTTP
// server serves HTTP/2 to any connection that starts with the preface
// (it is set to on every listener, so that a reload that changes a
// listener's protocol needs no new server); this is where a connection
// that may not is stopped. The first 4 bytes decide, however the client
// split them: net/http waits for the whole preface, across reads.
func (c *httpConn) checkStart(b []byte) bool {
	c.startLen += copy(c.start[c.startLen:], b)
	if string(c.start[:c.startLen]) != http2Preface[:c.startLen] {
		c.started = true
		return true
	}
	if c.startLen < len(c.start) {
		return true
	}
	c.started = true
	if !c.h2Allowed {
		c.refused = true
		return false
	}
	c.h2 = true
	return true
}

// restart makes the connection's next bytes be checked as a new start:
// the HTTP server takes a connection back from parking as a new one, and
// would serve HTTP/2 to one that sends the preface then. A parked
// connection spoke HTTP/1 (HTTP/2 ones are not parked), and stays so.
func (c *httpConn) restart() {
	c.h2Allowed = false
	c.started = false
	c.startLen = 0
}

// Write bounds each write (see writeBound).
func (c *httpConn) Write(b []byte) (int, error) {
	c.write.Arm(c.Conn)
	return c.Conn.Write(b)
}

// SetWriteDeadline passes a deadline on (the next Write sets its own
// again), but not net/http's clearing of it after each response: every
// write sets its own deadline, so the one in place is kept for the next.
func (c *httpConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	c.write.Forget()
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline passes the deadline on; the next Write sets its own again.
func (c *httpConn) SetDeadline(t time.Time) error {
	c.write.Forget()
	return c.Conn.SetDeadline(t)
}

// handshake runs the handshake of the listener's protocol, or on an auto
// listener of the protocol the client's first record header names, and
// returns the site it was made for. info.protocol (and info.sni and
// info.site, once the ClientHello chose them) are set as far as they are
// known, even on failure.
func (s *Server) handshake(ctx context.Context, st *listenerState, detected edge.WireProtocol, c net.Conn) (*forward.ConnInfo, *route.Site, net.Conn, error) {
	info := &forward.ConnInfo{Protocol: "unknown"}
	proto := edge.WireTLCP
	switch st.protocol {
	case config.ProtocolTLS:
		proto = edge.WireTLS
	case config.ProtocolAuto:
		proto = detected
	}
	if proto == edge.WireTLS {
		info.Protocol = "tls"
		tc := tls.Server(c, st.tls)
		err := tc.HandshakeContext(ctx)
		cs := tc.ConnectionState()
		info.SNI = cs.ServerName
		site := st.sites.TLS.LookupServerName(cs.ServerName)
		if site != nil {
			info.Site = site.Name
		}
		if err != nil {
			if rc, ok := c.(*edge.ReplayConn); ok && err.Error() == errNoTLSCertificates {
				info.SNI = rc.RefusedName
				err = &observe.SentAlertError{Alert: "unrecognized_name", Err: &route.ErrUnknownSite{Name: rc.RefusedName}}
			}
			return info, nil, nil, err
		}
		if cs.NegotiatedProtocol == acmeTLSProtocol {
			tc.Close()
			return info, nil, nil, errACMEChallenge
		}
		info.Protocol = observe.TLSVersionName(cs.Version)
		info.Suite = tls.CipherSuiteName(cs.CipherSuite)
		info.ALPN = cs.NegotiatedProtocol
		info.Resumed = cs.DidResume
		info.SetTLSClient(cs)
		return info, site, tc, nil
	}
	info.Protocol = "tlcp"
	tc := tlcp.Server(c, st.tlcp)
	err := tc.HandshakeContext(ctx)
	cs := tc.ConnectionState()
	info.SNI = cs.ServerName
	site := st.sites.TLCP.LookupServerName(cs.ServerName)
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
func handshakeResult(err error) string {
	if dir, alert, ok := observe.HandshakeAlert(err); ok {
		return "alert_" + dir + "_" + alert
	}
	var ne net.Error
	switch {
	case errors.Is(err, edge.ErrNotHandshake):
		return "not_tlcp_or_tls"
	case errors.Is(err, edge.ErrPlainHTTP):
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

// connListener is a net.Listener fed with established connections, for
// an http.Server.
type connListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	// parked are its idle keep-alive connections that wait for their
	// next request outside the HTTP server (idle.go).
	parked parkedConns
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// push hands c to the HTTP server; false when the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) close() {
	l.once.Do(func() {
		close(l.done)
		l.parked.closeAll()
	})
}

func (l *connListener) Close() error { l.close(); return nil }

func (l *connListener) Addr() net.Addr { return l.addr }

// forwardTCP copies the decrypted stream to a target of a tcp pool and
// back, passing half-closes through, until both directions end or the
// connection stays idle too long.
func (s *Server) forwardTCP(st *listenerState, p *upstream.Pool, client net.Conn, info *forward.ConnInfo) {
	defer client.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), st.upstreamDial)
	target, t, err := p.DialTCP(ctx)
	cancel()
	if err != nil {
		p.FailLog.Log("upstream failed", forward.FailureAttrs(p, err, slog.String("client", forward.AddrString(info.Client)))...)
		s.logTCP(info, p.Name, "", 0, 0, time.Since(start), err)
		return
	}
	defer target.Close()
	t.Inflight.Add(1)
	defer t.Inflight.Add(-1)
	s.metrics.UpstreamRequests.WithLabelValues(p.Name, "connected").Inc()

	var in, out atomic.Int64
	// The connection is idle when it moves no byte either way: a
	// direction that waits while the other one moves (an upload answered
	// once it is in, a download the client listens to in silence) is
	// not.
	moved := &lastMove{}
	moved.note()
	// A direction that ends cleanly (its reader's EOF) is half-closed
	// on the other side; one that fails (a reset, a connection closed at
	// shutdown or by a reload, idle for timeouts.idle) ends both, so that
	// the other direction does not wait on a peer that will never hear
	// from it again.
	abort := func() {
		client.Close()
		target.Close()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n, err := io.Copy(&idleWriter{c: target, bound: upstream.WriteBound{Timeout: st.idle}}, idleReader{client, st.idle, moved})
		in.Store(n)
		if err != nil {
			abort()
			return
		}
		closeWrite(target)
	}()
	go func() {
		defer wg.Done()
		n, err := io.Copy(&idleWriter{c: client, bound: upstream.WriteBound{Timeout: st.idle}}, idleReader{target, st.idle, moved})
		out.Store(n)
		if err != nil {
			abort()
			return
		}
		closeWrite(client)
	}()
	wg.Wait()
	s.logTCP(info, p.Name, t.Addr, in.Load(), out.Load(), time.Since(start), nil)
}

func (s *Server) logTCP(info *forward.ConnInfo, upstream, target string, in, out int64, d time.Duration, err error) {
	if s.access != nil {
		s.access.TCP(info, &observe.TCPLine{Upstream: upstream, Target: target, In: in, Out: out, Duration: d, Err: err})
	}
}

// lastMove is when a connection forwarded whole last moved a byte, in
// either direction, in Unix nanoseconds.
type lastMove struct{ at atomic.Int64 }

func (m *lastMove) note() { m.at.Store(time.Now().UnixNano()) }

func (m *lastMove) time() time.Time { return time.Unix(0, m.at.Load()) }

// idleReader fails a read once the connection has moved no byte, in
// either direction, for idle.
type idleReader struct {
	c     net.Conn
	idle  time.Duration
	moved *lastMove
}

func (r idleReader) Read(b []byte) (int, error) {
	if r.idle <= 0 {
		return r.c.Read(b)
	}
	for {
		deadline := r.moved.time().Add(r.idle)
		_ = r.c.SetReadDeadline(deadline)
		n, err := r.c.Read(b)
		if n > 0 {
			r.moved.note()
		}
		var ne net.Error
		if n > 0 || err == nil || !errors.As(err, &ne) || !ne.Timeout() || !r.moved.time().Add(r.idle).After(deadline) {
			return n, err
		}
		// The other direction moved meanwhile: wait on. A timed-out
		// read leaves TCP, TLCP and TLS connections readable.
	}
}

// idleWriter fails a write that blocks longer than idle (see
// writeBound); nothing else sets c's write deadline meanwhile.
type idleWriter struct {
	c     net.Conn
	bound upstream.WriteBound
}

func (w *idleWriter) Write(b []byte) (int, error) {
	w.bound.Arm(w.c)
	return w.c.Write(b)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

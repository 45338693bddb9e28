// Package proxy is gmgate's runtime: it accepts client connections
// (PROXY protocol header first, where trusted), tells TLCP from TLS on
// auto listeners, drives the handshakes with their limits and timeouts,
// routes by host and path to upstream pools (with health checks and
// passive ejection), forwards HTTP through httputil.ReverseProxy or whole
// TCP streams, and writes the metrics and the access log. It also runs
// the admin listener and carries out reloads and graceful shutdown.
//
// Protocol work belongs to package tlcp and crypto/tls, certificates to
// package certs, key operations to package accel; proxy does not parse
// certificates or keys itself.
package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/admin"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp"
)

// Options are what a Server takes besides its configuration.
type Options struct {
	// Logger is the process log; JSON on stderr at the configured level
	// when nil.
	Logger *slog.Logger
	// AccessLog, when set, receives the access log instead of the
	// destination named in the configuration.
	AccessLog *slog.Logger
	// Started, when set, is called by Run once the server serves.
	Started func(*Server)
	// ReopenLogs, when it receives, makes Run reopen the access log file
	// (after logrotate moved it; SIGUSR1).
	ReopenLogs <-chan struct{}
}

// Server is a running gateway.
type Server struct {
	opts        Options
	log         *slog.Logger
	level       slog.LevelVar      // of log when Options.Logger is nil
	access      *observe.AccessLog // nil when off
	accessClose io.Closer
	stdErrorLog *log.Logger
	// fwd forwards requests, logging to log and stdErrorLog.
	fwd *forward.Forwarder
	// stdLog receives net/http's lines, also those written to the
	// standard logger while the server runs.
	stdLog  *observe.StdLogWriter
	metrics *observe.Metrics
	// stapler staples OCSP responses to file-based TLS certificates; it
	// outlives generations, so that an unchanged certificate keeps its
	// response across reloads.
	stapler *certs.Stapler

	mu        sync.Mutex // serializes Start, Reload and Shutdown
	gen       *generation
	listeners map[string]*runningListener
	admin     *http.Server
	adminLn   net.Listener
	// adminListen and accessDest are admin.listen and log.access as the
	// process started with them; a reload does not change them.
	adminListen string
	accessDest  string
	started     bool
	draining    atomic.Bool
	closed      bool
	// pprof is admin.pprof of the running configuration.
	pprof atomic.Bool
	// api is the admin API and console (nil until Start); history the
	// reloads it shows.
	api     *admin.Handler
	history reloadHistory
	// adminSettings are the admin listener's access control in service.
	adminSettings atomic.Pointer[adminSettings]
	// adminTLS is set when the admin listener speaks TLS (admin.cert),
	// adminTLCP when it speaks TLCP (admin.tlcp).
	adminTLS, adminTLCP bool

	// sessionCaches keep TLCP sessions across reloads, by listener. A
	// session resumes only under the configuration it was made under
	// (tlcp binds it), so a reload that tightens client_auth or
	// client_ca, or a certificate rotation, sends clients through a full
	// handshake.
	sessionCaches map[string]*sessionCache
	// ticketers seal the TLS session tickets of each site (by certificate
	// source, see site.source) with keys of their own, kept across
	// reloads like the TLCP session caches.
	ticketers map[string]*tls.Config
	// shangMiTicketKeys seal the TLS 1.3 ShangMi tickets of each site
	// (without shared_sessions), kept across reloads in the same way.
	shangMiTicketKeys map[string][32]byte

	// retired are listeners removed by a reload whose connections may
	// still be finishing.
	retired  []*runningListener
	retiring sync.WaitGroup
	// retiredStores are the certificate stores of replaced generations,
	// whose keys close once the handshakes that may use them are over
	// (or at shutdown).
	retiredStores []*certs.Store

	acceptWG sync.WaitGroup // accept loops
	connWG   sync.WaitGroup // connection goroutines (handshakes, TCP forwarding)
	inflight sync.WaitGroup // HTTP handlers, including upgraded connections
	connsMu  sync.Mutex
	conns    map[*trackedConn]struct{}
}

// New loads the certificates and keys of cfg, binds its listeners and the
// admin listener, and returns a server ready to Start. It fails, holding
// nothing, when any part cannot be set up: the process never half-starts.
// The error is a *config.Error with every problem found (certificates,
// keys, addresses), the same problems Check reports.
func New(cfg *config.Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := newServer(cfg, opts)
	var probs []config.Problem
	access, closer, err := openAccessLog(cfg.Log.Access, opts.AccessLog)
	if err != nil {
		probs = append(probs, accessLogProblem(cfg, err))
	}
	s.access, s.accessClose = access, closer
	s.fwd.Access = access
	s.adminListen, s.accessDest = cfg.Admin.Listen, cfg.Log.Access

	gen, err := s.build(cfg, nil, buildOptions{})
	if err != nil {
		probs = append(probs, problemsOf(err)...)
	}
	// Bind everything before serving anything. When the configuration
	// cannot serve anyway, the addresses are still checked, so that every
	// problem is reported at once.
	if gen == nil {
		probs = append(probs, checkAddresses(cfg, 0)...)
	} else {
		for _, lc := range cfg.Listeners {
			rl, err := s.bind(lc, gen)
			if err != nil {
				probs = append(probs, bindProblem(cfg, config.Field(lc.Path(), "listen"), lc.Listen, err))
				continue
			}
			s.listeners[lc.Name] = rl
		}
	}
	if cfg.Admin.Listen != "off" && gen != nil {
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			probs = append(probs, bindProblem(cfg, "admin.listen", cfg.Admin.Listen, err))
		} else {
			s.adminLn = ln
		}
	}
	if len(probs) > 0 {
		s.unbindAll()
		if s.adminLn != nil {
			s.adminLn.Close()
		}
		if gen != nil {
			gen.close()
		}
		s.stapler.Close()
		s.closeAccessLog()
		return nil, configError(probs)
	}
	resolveRedirectPorts(gen, func(name string) *runningListener { return s.listeners[name] })
	s.adopt(gen)
	s.pprof.Store(cfg.Admin.Pprof)
	s.history.started()
	accel.SetObserver(s.metrics.AccelObserver())
	s.metrics.SetCerts(gen.store)
	s.metrics.SetACME(gen.acmeCollectors())
	for _, w := range gen.warnings {
		s.log.Warn("configuration warning", "warning", w.String())
	}
	return s, nil
}

func newServer(cfg *config.Config, opts Options) *Server {
	s := &Server{
		opts:          opts,
		metrics:       observe.NewMetrics(),
		listeners:     map[string]*runningListener{},
		sessionCaches: map[string]*sessionCache{},
		ticketers:     map[string]*tls.Config{},
		conns:         map[*trackedConn]struct{}{},
	}
	s.shangMiTicketKeys = map[string][32]byte{}
	s.log = opts.Logger
	if s.log == nil {
		s.level.Set(parseLevel(cfg.Log.Level))
		s.log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: &s.level}))
		// The process's own log: the Redis client's lines go there too.
		observe.RedisLines.Log.Store(s.log)
	}
	s.stdLog = observe.NewStdLogWriter(s.log)
	s.stdErrorLog = log.New(s.stdLog, "", 0)
	s.stapler = certs.NewStapler(certs.StaplerOptions{Logger: s.log})
	s.fwd = &forward.Forwarder{Log: s.log, ErrorLog: s.stdErrorLog, Metrics: s.metrics}
	return s
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

func openAccessLog(dest string, override *slog.Logger) (*observe.AccessLog, io.Closer, error) {
	if override != nil {
		return &observe.AccessLog{Logger: override}, nil, nil
	}
	var w io.Writer
	var closer io.Closer
	switch dest {
	case "off":
		return nil, nil, nil
	case "stdout", "":
		w = os.Stdout
	case "stderr":
		w = os.Stderr
	default:
		f, err := observe.OpenAccessFile(dest)
		if err != nil {
			return nil, nil, fmt.Errorf("log.access: %w", err)
		}
		w, closer = f, f
	}
	return &observe.AccessLog{Out: observe.NewBufferedLog(w, observe.AccessFlushDelay)}, closer, nil
}

// closeAccessLog writes the lines that wait and closes the file.
func (s *Server) closeAccessLog() {
	if s.access != nil && s.access.Out != nil {
		s.access.Out.Flush()
	}
	if s.accessClose != nil {
		s.accessClose.Close()
	}
}

// Start serves the bound listeners and the admin listener.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	// http.Transport logs to the standard logger; its lines belong in
	// the JSON log too.
	log.SetOutput(s.stdLog)
	log.SetFlags(0)
	s.gen.start(nil, s.log)
	s.startACME(s.gen)
	for _, rl := range s.listeners {
		s.serve(rl)
	}
	if s.adminLn != nil {
		s.admin = &http.Server{
			Handler:           s.adminHandler(),
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          s.stdErrorLog,
			ConnContext:       adminConnContext,
		}
		ln := s.adminLn
		if as := s.adminSettings.Load(); as != nil {
			s.adminTLS, s.adminTLCP = as.tls != nil, as.tlcp != nil
			switch {
			case as.tls != nil && as.tlcp != nil:
				ln = newAdminAutoListener(ln, s.adminTLSConfig(as.tls), s.adminTLCPConfig(as.tlcp))
			case as.tls != nil:
				ln = tls.NewListener(ln, s.adminTLSConfig(as.tls))
			case as.tlcp != nil:
				ln = tlcp.NewListener(ln, s.adminTLCPConfig(as.tlcp))
			}
		}
		go func() { _ = s.admin.Serve(ln) }()
	}
	s.log.Info("gmgate started", "listeners", len(s.listeners), "admin", forward.AddrString(s.AdminAddr()))
}

// Addr returns the address the named listener is bound to (nil when
// there is no such listener).
func (s *Server) Addr(listener string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rl, ok := s.listeners[listener]; ok {
		return rl.ln.Addr()
	}
	return nil
}

// AdminAddr returns the admin listener's address (nil when it is off).
func (s *Server) AdminAddr() net.Addr {
	if s.adminLn == nil {
		return nil
	}
	return s.adminLn.Addr()
}

// current is the generation in service.
func (s *Server) current() *generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// activeConns is the number of client connections listener holds now (0
// for a listener that is not bound).
func (s *Server) activeConns(listener string) int64 {
	s.mu.Lock()
	rl := s.listeners[listener]
	s.mu.Unlock()
	if rl == nil {
		return 0
	}
	return rl.active.Load()
}

// parkedConns is the number of idle keep-alive connections of listener
// parked outside its HTTP server now.
func (s *Server) parkedConns(listener string) int {
	s.mu.Lock()
	rl := s.listeners[listener]
	s.mu.Unlock()
	if rl == nil {
		return 0
	}
	return rl.httpConns.ParkedCount()
}

// siteFor is the site of listener that serves requests for host.
func (s *Server) siteFor(listener, host string) *route.Site {
	s.mu.Lock()
	rl := s.listeners[listener]
	s.mu.Unlock()
	if rl == nil {
		return nil
	}
	return rl.state.Load().sites.All.Lookup(host)
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *observe.Metrics { return s.metrics }

// Shutdown stops accepting, lets requests and connections in flight
// finish until ctx is done, then closes what is left. It returns
// ctx.Err() when it had to cut connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.draining.Store(true)
	listeners := make([]*runningListener, 0, len(s.listeners))
	for _, rl := range s.listeners {
		listeners = append(listeners, rl)
		rl.ln.Close()
	}
	listeners = append(listeners, s.retired...)
	s.mu.Unlock()
	s.log.Info("shutting down: draining connections")
	s.acceptWG.Wait()

	var wg sync.WaitGroup
	for _, rl := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl.shutdownHTTP(ctx)
		}()
	}
	wg.Wait()
	drained := make(chan struct{})
	go func() {
		s.connWG.Wait()
		s.inflight.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = ctx.Err()
		n := s.closeConns(nil)
		s.log.Warn("shutdown timeout: closed connections still open", "connections", n)
		for _, rl := range listeners {
			rl.closeHTTP()
		}
		<-drained
	}
	s.retiring.Wait()
	if s.admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.admin.Shutdown(sctx)
		cancel()
		s.api.Close()
	} else if s.adminLn != nil {
		s.adminLn.Close()
	}
	s.mu.Lock()
	s.gen.close()
	for _, st := range s.retiredStores {
		st.Close()
	}
	s.retiredStores = nil
	s.stapler.Close()
	s.mu.Unlock()
	s.closeAccessLog()
	if log.Writer() == io.Writer(s.stdLog) {
		log.SetOutput(os.Stderr)
		log.SetFlags(log.LstdFlags)
	}
	s.log.Info("shut down")
	return err
}

// closeConns closes the client connections of listener rl (of every
// listener when rl is nil), whatever they are doing, and returns how
// many it closed.
func (s *Server) closeConns(rl *runningListener) int {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	n := 0
	for c := range s.conns {
		if rl == nil || c.listener == rl {
			c.Conn.Close()
			n++
		}
	}
	return n
}

func (s *Server) unbindAll() {
	for name, rl := range s.listeners {
		rl.ln.Close()
		delete(s.listeners, name)
	}
}

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
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/internal/route"

	"github.com/gmgate/gmgate/internal/forward"

	"github.com/gmgate/gmgate/internal/upstream"

	"github.com/gmgate/gmgate/internal/edge"

	"github.com/gmgate/gmgate/internal/observe"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/tcplisten"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
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

// generation is everything built from one configuration.
type generation struct {
	cfg         *config.Config
	store       *certs.Store
	storeCancel context.CancelFunc
	pools       map[string]*upstream.Pool
	handshakes  map[string]*edge.HandshakeLimiter // by listener
	states      map[string]*listenerState
	// acme are the ACME managers by listener name.
	acme map[string]*acmeSite
	// shared is the session store (nil without session_store).
	shared *sharedStore
	// warnings are what the configuration check reports without
	// refusing the configuration.
	warnings []config.Problem
	// sessionCaches and ticketers are the server's as this generation
	// leaves them: build changes these copies, and the server adopts
	// them only when the generation goes into service, so that a
	// configuration that fails leaves the sessions in service alone.
	sessionCaches map[string]*sessionCache
	ticketers     map[string]*tls.Config
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
		s.closeAccessLog()
		return nil, configError(probs)
	}
	resolveRedirectPorts(gen, func(name string) *runningListener { return s.listeners[name] })
	s.adopt(gen)
	s.pprof.Store(cfg.Admin.Pprof)
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
	s.log = opts.Logger
	if s.log == nil {
		s.level.Set(parseLevel(cfg.Log.Level))
		s.log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: &s.level}))
		// The process's own log: the Redis client's lines go there too.
		observe.RedisLines.Log.Store(s.log)
	}
	s.stdLog = observe.NewStdLogWriter(s.log)
	s.stdErrorLog = log.New(s.stdLog, "", 0)
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

// buildOptions say what a generation is built for.
type buildOptions struct {
	// check builds to report problems, not to serve: no ACME manager is
	// made.
	check bool
	// offline opens no key (see certs.LoadOptions.Offline); with check.
	offline bool
}

// openStore loads every certificate source of cfg into a store, with the
// problems found at the fields they belong to; paths are certSources'.
// Two listeners of one name (a problem of the file) are taken once.
func openStore(cfg *config.Config, logger *slog.Logger, offline bool) (store *certs.Store, paths map[string]string, probs []config.Problem) {
	sources, paths := certSources(cfg)
	seen := map[string]bool{}
	sources = slices.DeleteFunc(sources, func(src certs.Source) bool {
		dup := seen[src.Name]
		seen[src.Name] = true
		return dup
	})
	// The keys of certificates a reload replaces close once the
	// handshakes that may have chosen them are over: those of clients,
	// and those of tlcp:// upstreams presenting a client identity, which
	// a replaced generation's pools still make after a client's
	// handshake (a TCP route dials once the client's handshake is done)
	// or for a request begun before the reload, on as many targets as
	// the upstream's retries allow after the first, each connect within
	// timeouts.upstream_connect.
	retries := 1
	for _, uc := range cfg.Upstreams {
		if uc != nil && uc.Scheme() == "tlcp" && uc.TLCP.HasIdentity() && uc.Retries != nil {
			retries = max(retries, *uc.Retries)
		}
	}
	closeDelay := cfg.Timeouts.Handshake.D() + time.Duration(1+retries)*cfg.Timeouts.UpstreamConnect.D()
	store, err := certs.NewStore(certs.StoreOptions{Logger: logger, Load: certs.LoadOptions{Offline: offline}, CloseDelay: closeDelay}, sources...)
	if err != nil {
		probs = certProblems(cfg, paths, err)
	}
	return store, paths, probs
}

// certSources lists the certificate sources of cfg: a site's TLCP and
// TLS certificates, and the client identities of tlcp:// upstreams; paths
// maps each site's source name to its field path.
func certSources(cfg *config.Config) (sources []certs.Source, paths map[string]string) {
	paths = map[string]string{}
	for _, sp := range tlsSites(cfg) {
		src := certs.Source{Name: sp.source()}
		if sp.servesTLCP() {
			t := sp.cfg.TLCP
			src.TLCP = &certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey}
		}
		if sp.servesTLS() && sp.cfg.TLS.ACME == nil {
			src.TLS = &certs.TLSFiles{Cert: sp.cfg.TLS.Cert, Key: sp.cfg.TLS.Key}
		}
		if src.TLCP != nil || src.TLS != nil {
			sources = append(sources, src)
			paths[src.Name] = sp.cfg.Path()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		// The client identities of tlcp:// upstreams are loaded and
		// checked, watched and reloaded like the listeners' certificates.
		if uc := cfg.Upstreams[name]; uc != nil && uc.Scheme() == "tlcp" && uc.TLCP.HasIdentity() {
			t := uc.TLCP
			sources = append(sources, certs.Source{Name: upstream.UpstreamSource(name), SignOnly: true,
				TLCP: &certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey}})
		}
	}
	return sources, paths
}

// build makes a generation from cfg, reusing the pools and ACME managers
// of prev whose configuration did not change. It loads and checks every
// certificate and key, and reports every problem it finds in one
// *config.Error.
func (s *Server) build(cfg *config.Config, prev *generation, bo buildOptions) (*generation, error) {
	store, sitePaths, probs := openStore(cfg, s.log, bo.offline)
	gen := &generation{
		cfg:        cfg,
		store:      store,
		pools:      map[string]*upstream.Pool{},
		handshakes: map[string]*edge.HandshakeLimiter{},
		states:     map[string]*listenerState{},
		acme:       map[string]*acmeSite{},

		sessionCaches: maps.Clone(s.sessionCaches),
		ticketers:     maps.Clone(s.ticketers),
	}
	for _, lc := range cfg.Listeners {
		if prev != nil && prev.handshakes[lc.Name] != nil && prev.cfg.Limits.MaxHandshakes == cfg.Limits.MaxHandshakes && prev.cfg.Limits.HandshakeWait == cfg.Limits.HandshakeWait {
			// Keep counting the handshakes in progress across the reload.
			gen.handshakes[lc.Name] = prev.handshakes[lc.Name]
		} else {
			gen.handshakes[lc.Name] = edge.NewHandshakeLimiter(cfg.Limits.MaxHandshakes, cfg.Limits.HandshakeWait.D())
		}
	}
	for name, uc := range cfg.Upstreams {
		if prev != nil {
			if old, ok := prev.pools[name]; ok && reflect.DeepEqual(old.Cfg, *uc) && reflect.DeepEqual(old.Timeouts, cfg.Timeouts) && old.MaxResponseHeader == cfg.Limits.MaxResponseHeaderBytes && old.FilesUnchanged() {
				gen.pools[name] = old
				continue
			}
		}
		p, err := upstream.NewPool(name, uc, cfg.Timeouts, cfg.Limits.MaxResponseHeaderBytes, store, bo.offline, s.log, s.metrics)
		if err != nil {
			probs = append(probs, poolProblem(cfg, name, err))
			continue
		}
		gen.pools[name] = p
	}
	shared, storeProbs, storeWarnings := s.sessionStore(cfg, prev, bo)
	gen.shared = shared
	probs = append(probs, storeProbs...)
	probs = append(probs, s.acmeSites(cfg, prev, gen, bo.check)...)
	for i, lc := range cfg.Listeners {
		st, err := s.listenerState(i, lc, gen)
		if err != nil {
			probs = append(probs, cfg.ProblemAt(lc.Path(), err, ""))
			continue
		}
		gen.states[lc.Name] = st
	}
	if len(probs) > 0 {
		gen.release(prev, false)
		return nil, configError(probs)
	}
	gen.warnings = append(s.warnings(cfg, gen, sitePaths), storeWarnings...)
	return gen, nil
}

// adopt puts gen in service, with the session caches and ticket keys it
// was built with.
func (s *Server) adopt(gen *generation) {
	s.gen = gen
	s.sessionCaches, s.ticketers = gen.sessionCaches, gen.ticketers
}

// acmeCollectors are the metrics of g's ACME managers.
func (g *generation) acmeCollectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, site := range g.acme {
		out = append(out, site.mgr)
	}
	return out
}

// start begins health checks and certificate watching.
func (g *generation) start(prev *generation, log *slog.Logger) {
	for name, p := range g.pools {
		if cu, ok := p.Transport.(upstream.CertificateUser); ok {
			cu.UseStore(g.store)
		}
		if prev == nil || prev.pools[name] != p {
			p.Start()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.storeCancel = cancel
	go func() {
		if err := g.store.Watch(ctx); err != nil && ctx.Err() == nil {
			log.Warn("certificate files are not watched; reload with SIGHUP after changing them", "cause", err.Error())
		}
	}()
}

// release stops what g started and closes what it holds, except the
// pools, ACME managers and session store that keep shares with it (keep
// is the generation that replaces g, or the one a failed g was built
// beside; nil for none). The keys of g's certificates close at once when
// g never served or nothing replaces it (no handshake can use them any
// more), and after the store's close delay when keep replaces a g that
// served (handshakes in flight may have chosen them).
func (g *generation) release(keep *generation, served bool) {
	if g.storeCancel != nil {
		g.storeCancel()
	}
	for name, p := range g.pools {
		if keep == nil || keep.pools[name] != p {
			p.Close()
		}
	}
	for name, site := range g.acme {
		if keep == nil || keep.acme[name] != site {
			site.mgr.Stop()
		}
	}
	if keep == nil {
		g.shared.closeUnless(nil)
	} else {
		g.shared.closeUnless(keep.shared)
	}
	// After the pools, whose health checks may present a client
	// certificate of the store.
	if g.store == nil {
		return
	}
	if served && keep != nil {
		g.store.Retire()
	} else {
		g.store.Close()
	}
}

func (g *generation) close() { g.release(nil, true) }

func (s *Server) listenerState(li int, lc config.Listener, gen *generation) (*listenerState, error) {
	st := &listenerState{
		name:          lc.Name,
		protocol:      lc.Protocol,
		http2:         lc.ServesHTTP2(),
		maxConns:      int64(gen.cfg.Limits.MaxConnections),
		handshake:     gen.cfg.Timeouts.Handshake.D(),
		clientHello:   gen.cfg.Timeouts.ClientHello.D(),
		idle:          gen.cfg.Timeouts.Idle.D(),
		requestBody:   gen.cfg.Timeouts.RequestBody.D(),
		upstreamDial:  gen.cfg.Timeouts.UpstreamConnect.D(),
		handshakes:    gen.handshakes[lc.Name],
		proxyProtocol: lc.ProxyProtocol,
	}
	if r := gen.cfg.Timeouts.RequestBodyMinRate; r != nil {
		st.requestBodyMinRate = int64(*r)
	}
	var sites []*route.Site
	for j, sc := range lc.SiteList() {
		if lc.Protocol == config.ProtocolHTTP || lc.Protocol == config.ProtocolTCP {
			// An http or tcp listener has no identity: its one site
			// routes.
			sites = append(sites, s.plainSite(lc, sc, gen))
			continue
		}
		site, err := s.buildSite(siteSpec{lc: lc, li: li, si: j, cfg: sc}, gen)
		if err != nil {
			return nil, err
		}
		sites = append(sites, site)
	}
	st.sites = route.NewSiteTable(sites)
	if lc.Protocol == config.ProtocolHTTP {
		st.plain = newPlainHTTP(lc, gen)
	}
	if lc.Protocol == config.ProtocolTLCP || lc.Protocol == config.ProtocolAuto {
		st.tlcp = outerTLCP(st.sites)
	}
	if lc.Protocol == config.ProtocolTLS || lc.Protocol == config.ProtocolAuto {
		st.tls = outerTLS(st.sites)
	}
	return st, nil
}

// plainSite is the one site of an http or tcp listener: routes without
// an identity.
func (s *Server) plainSite(lc config.Listener, sc config.Site, gen *generation) *route.Site {
	st := &route.Site{Name: sc.Name, Implicit: true, IsDefault: true, Headers: *sc.SessionHeaders, Router: &route.Router{Routes: compileRoutes(lc, sc.Routes, gen)}}
	st.Forwarding = forward.NewHeaderPolicy(st.Headers, forward.IdentityHeaderNames(gen.cfg))
	for v := range st.Requests {
		st.Requests[v] = s.metrics.RequestDuration.WithLabelValues(lc.Name, sc.Name, route.HTTPVersions[v])
	}
	return st
}

// sessionCache is a listener's TLCP session cache and its settings.
type sessionCache struct {
	size     int
	lifetime time.Duration
	cache    tlcp.SessionCache
}

// sessionCache returns the listener's session cache, kept across reloads
// unless its settings change, behind gen's shared store when shared; nil
// when resumption is off.
func (s *Server) sessionCache(gen *generation, listener string, sc *config.SessionCache, shared bool) tlcp.SessionCache {
	size, lifetime := tlcp.DefaultSessionCacheSize, tlcp.DefaultSessionLifetime
	if sc != nil {
		if sc.Size != nil {
			size = *sc.Size
		}
		if sc.Lifetime != 0 {
			lifetime = sc.Lifetime.D()
		}
	}
	if size == 0 {
		delete(gen.sessionCaches, listener)
		return nil
	}
	c, ok := gen.sessionCaches[listener]
	if !ok || c.size != size || c.lifetime != lifetime {
		c = &sessionCache{size: size, lifetime: lifetime, cache: tlcp.NewLRUSessionCache(size, lifetime)}
		gen.sessionCaches[listener] = c
	}
	return gen.shareSessions(c.cache, lifetime, shared)
}

func loadSMPool(file string) (*smx509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return certs.CAPool(file, pem)
}

func tlcpClientAuth(s string) tlcp.ClientAuthType {
	switch s {
	case "request":
		return tlcp.RequestClientCert
	case "require":
		return tlcp.RequireAnyClientCert
	case "verify_if_given":
		return tlcp.VerifyClientCertIfGiven
	case "require_and_verify":
		return tlcp.RequireAndVerifyClientCert
	}
	return tlcp.NoClientCert
}

func tlsClientAuth(s string) tls.ClientAuthType {
	switch s {
	case "request":
		return tls.RequestClientCert
	case "require":
		return tls.RequireAnyClientCert
	case "verify_if_given":
		return tls.VerifyClientCertIfGiven
	case "require_and_verify":
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
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
		}
		go func() { _ = s.admin.Serve(s.adminLn) }()
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

// Metrics returns the server's metrics.
func (s *Server) Metrics() *observe.Metrics { return s.metrics }

// Reload replaces the configuration without dropping connections:
// listeners whose address is unchanged keep their socket and take the new
// routes, certificates and limits; new listeners are bound; removed ones
// stop accepting and their connections finish. A configuration that
// cannot be set up leaves the running one in place.
func (s *Server) Reload(cfg *config.Config) error {
	err := s.reload(cfg)
	if err != nil {
		s.metrics.Reloads.WithLabelValues("failure").Inc()
		s.log.Error("reload failed; the previous configuration stays in service", "cause", err.Error())
		return err
	}
	s.metrics.Reloads.WithLabelValues("success").Inc()
	s.log.Info("configuration reloaded", "listeners", len(cfg.Listeners), "upstreams", len(cfg.Upstreams))
	return nil
}

func (s *Server) reload(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server is shut down")
	}
	prev := s.gen
	gen, err := s.build(cfg, prev, buildOptions{})
	if err != nil {
		return err
	}
	s.level.Set(parseLevel(cfg.Log.Level))
	// Bind new listeners first, so that a port in use fails the reload
	// before anything changed.
	var added []*runningListener
	for _, lc := range cfg.Listeners {
		if rl, ok := s.listeners[lc.Name]; ok && rl.listen == lc.Listen {
			continue
		}
		rl, err := s.bind(lc, gen)
		if err != nil {
			for _, a := range added {
				a.ln.Close()
			}
			gen.release(prev, false)
			return configError([]config.Problem{bindProblem(cfg, config.Field(lc.Path(), "listen"), lc.Listen, err)})
		}
		added = append(added, rl)
	}
	resolveRedirectPorts(gen, func(name string) *runningListener {
		for _, a := range added {
			if a.name == name {
				return a
			}
		}
		if rl, ok := s.listeners[name]; ok && rl.listen == listenAddr(cfg, name) {
			return rl
		}
		return nil
	})
	keep := map[string]bool{}
	for _, lc := range cfg.Listeners {
		keep[lc.Name] = true
	}
	for name, rl := range s.listeners {
		if nl, ok := gen.states[name]; ok && keep[name] && rl.listen == listenAddr(cfg, name) {
			rl.state.Store(nl)
			// The socket stays; its deferred accept follows the
			// listener's protocol and timeouts.handshake now.
			if lc, ok := listenerConfig(cfg, name); ok {
				if err := tcplisten.SetDeferAccept(rl.ln, deferAccept(cfg, lc)); err != nil {
					s.log.Warn("deferred accept of a kept listener not changed", "listener", name, "cause", err.Error())
				}
			}
			continue
		}
		s.stopListener(rl, cfg.Timeouts.Shutdown.D())
		delete(s.listeners, name)
	}
	for _, rl := range added {
		s.listeners[rl.name] = rl
		if s.started {
			s.serve(rl)
		}
	}
	s.adopt(gen)
	s.pprof.Store(cfg.Admin.Pprof)
	s.metrics.SetCerts(gen.store)
	s.metrics.SetACME(gen.acmeCollectors())
	if s.started {
		gen.start(prev, s.log)
		s.startACME(gen)
	}
	prev.release(gen, true)
	s.retiredStores = append(slices.DeleteFunc(s.retiredStores, (*certs.Store).Closed), prev.store)
	for _, w := range gen.warnings {
		s.log.Warn("configuration warning", "warning", w.String())
	}
	s.warnUnapplied(cfg)
	return nil
}

// warnUnapplied logs each setting of cfg that differs from what the
// process runs and that a reload does not apply, with the value in
// service: at every reload until a restart applies it.
func (s *Server) warnUnapplied(cfg *config.Config) {
	if cfg.Admin.Listen != s.adminListen {
		s.log.Warn("admin.listen changes take effect on restart", "running", s.adminListen)
	}
	if cfg.Log.Access != s.accessDest {
		s.log.Warn("log.access changes take effect on restart", "running", s.accessDest)
	}
	// A listener's HTTP server is made when its socket is bound; one that
	// a reload keeps serves on with the settings it was made with.
	for _, setting := range []struct {
		msg     string
		want    any
		running func(*http.Server) any
	}{
		{"timeouts.read_header changes take effect on restart for the listeners a reload keeps", cfg.Timeouts.ReadHeader.D(),
			func(h *http.Server) any { return h.ReadHeaderTimeout }},
		{"timeouts.idle changes take effect on restart for HTTP keep-alive and HTTP/2 writes on the listeners a reload keeps", cfg.Timeouts.Idle.D(),
			func(h *http.Server) any { return h.IdleTimeout }},
		{"limits.max_header_bytes changes take effect on restart for the listeners a reload keeps", cfg.Limits.MaxHeaderBytes,
			func(h *http.Server) any { return h.MaxHeaderBytes }},
	} {
		// By the value in service, for listeners bound at different times.
		names := map[any][]string{}
		var order []any
		for _, lc := range cfg.Listeners {
			rl := s.listeners[lc.Name]
			if rl == nil {
				continue
			}
			if v := setting.running(rl.httpSrv); v != setting.want {
				if names[v] == nil {
					order = append(order, v)
				}
				names[v] = append(names[v], lc.Name)
			}
		}
		for _, v := range order {
			shown := v
			if d, ok := v.(time.Duration); ok {
				shown = d.String()
			}
			s.log.Warn(setting.msg, "running", shown, "listeners", strings.Join(names[v], ","))
		}
	}
}

func listenAddr(cfg *config.Config, name string) string {
	lc, _ := listenerConfig(cfg, name)
	return lc.Listen
}

// listenerConfig returns the listener called name in cfg.
func listenerConfig(cfg *config.Config, name string) (config.Listener, bool) {
	for _, l := range cfg.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return config.Listener{}, false
}

// ReloadCertificates loads the certificate files again (SIGHUP without a
// configuration file, or for tests).
func (s *Server) ReloadCertificates() error {
	s.mu.Lock()
	store := s.gen.store
	s.mu.Unlock()
	return store.Reload()
}

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
			rl.httpConns.Close()
			_ = rl.httpSrv.Shutdown(ctx)
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
			rl.httpSrv.Close()
		}
		<-drained
	}
	s.retiring.Wait()
	if s.admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.admin.Shutdown(sctx)
		cancel()
	} else if s.adminLn != nil {
		s.adminLn.Close()
	}
	s.mu.Lock()
	s.gen.close()
	for _, st := range s.retiredStores {
		st.Close()
	}
	s.retiredStores = nil
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

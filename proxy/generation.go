package proxy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
)

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
	// shangMiTicketKeys are the server's likewise (Server).
	shangMiTicketKeys map[string][32]byte
	// revocation are the revocation checkers of sites and upstreams.
	revocation *revocationSet
	// admin is the admin listener's access control (adminstate.go).
	admin *adminSettings
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
func openStore(cfg *config.Config, logger *slog.Logger, offline bool, stapler *certs.Stapler) (store *certs.Store, paths map[string]string, probs []config.Problem) {
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
		if uc != nil && (uc.Scheme() == "tlcp" && uc.TLCP.HasIdentity() || uc.Scheme() == config.SchemeTLS13SM && uc.TLS13SM.HasIdentity()) && uc.Retries != nil {
			retries = max(retries, *uc.Retries)
		}
	}
	closeDelay := cfg.Timeouts.Handshake.D() + time.Duration(1+retries)*cfg.Timeouts.UpstreamConnect.D()
	store, err := certs.NewStore(certs.StoreOptions{Logger: logger, Load: certs.LoadOptions{Offline: offline}, CloseDelay: closeDelay, Stapler: stapler}, sources...)
	if err != nil {
		probs = certProblems(cfg, paths, err)
	}
	return store, paths, probs
}

// certSources lists the certificate sources of cfg: a site's TLCP, TLS
// and SM2 (tls.sm2) certificates, and the client identities of tlcp:// upstreams; paths
// maps each site's source name to its field path.
func certSources(cfg *config.Config) (sources []certs.Source, paths map[string]string) {
	paths = map[string]string{}
	for _, sp := range tlsSites(cfg) {
		src := certs.Source{Name: sp.source()}
		if sp.servesTLCP() {
			t := sp.cfg.TLCP
			src.TLCP = &certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey, OCSPStapling: t.Staples()}
		}
		if sp.servesTLS() && sp.cfg.TLS.ACME == nil {
			src.TLS = &certs.TLSFiles{Cert: sp.cfg.TLS.Cert, Key: sp.cfg.TLS.Key, OCSPStapling: sp.cfg.TLS.Staples()}
		}
		if sp.servesSM2() {
			src.SM2 = &certs.SM2Files{Cert: sp.cfg.TLS.SM2.Cert, Key: sp.cfg.TLS.SM2.Key}
		}
		if src.TLCP != nil || src.TLS != nil || src.SM2 != nil {
			sources = append(sources, src)
			paths[src.Name] = sp.cfg.Path()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		// The client identities of tlcp:// upstreams are loaded and
		// checked, watched and reloaded like the listeners' certificates.
		if uc := cfg.Upstreams[name]; uc != nil && uc.Scheme() == "tlcp" && uc.TLCP.HasIdentity() {
			t := uc.TLCP
			sources = append(sources, certs.Source{Name: upstream.Source(name), SignOnly: true,
				TLCP: &certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey}})
		}
		// Those of tls13sm:// upstreams are a signing pair alone.
		if uc := cfg.Upstreams[name]; uc != nil && uc.Scheme() == config.SchemeTLS13SM && uc.TLS13SM.HasIdentity() {
			t := uc.TLS13SM
			sources = append(sources, certs.Source{Name: upstream.Source(name), SignOnly: true,
				TLCP: &certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey}})
		}
	}
	return sources, paths
}

// build makes a generation from cfg, reusing the pools and ACME managers
// of prev whose configuration did not change. It loads and checks every
// certificate and key, and reports every problem it finds in one
// *config.Error.
func (s *Server) build(cfg *config.Config, prev *generation, bo buildOptions) (*generation, error) {
	var stapler *certs.Stapler
	if !bo.check {
		stapler = s.stapler
	}
	store, sitePaths, probs := openStore(cfg, s.log, bo.offline, stapler)
	gen := &generation{
		cfg:        cfg,
		store:      store,
		pools:      map[string]*upstream.Pool{},
		handshakes: map[string]*edge.HandshakeLimiter{},
		states:     map[string]*listenerState{},
		acme:       map[string]*acmeSite{},

		sessionCaches: maps.Clone(s.sessionCaches),
		ticketers:     maps.Clone(s.ticketers),

		shangMiTicketKeys: maps.Clone(s.shangMiTicketKeys),
		revocation:        newRevocationSet(bo.check, prev, s.metrics.Revocation),
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
	s.upstreamRevocation(cfg, prev, gen)
	shared, storeProbs, storeWarnings := s.sessionStore(cfg, prev, bo)
	gen.shared = shared
	probs = append(probs, storeProbs...)
	probs = append(probs, s.acmeSites(cfg, prev, gen, bo.check)...)
	adminSettings, adminProbs := buildAdmin(cfg, bo.offline)
	gen.admin = adminSettings
	probs = append(probs, adminProbs...)
	for i, lc := range cfg.Listeners {
		st, err := s.listenerState(i, lc, gen)
		if err != nil {
			probs = append(probs, cfg.ProblemAt(lc.Path(), err, ""))
			continue
		}
		gen.states[lc.Name] = st
	}
	probs = append(probs, gen.revocation.probs...)
	if len(probs) > 0 {
		gen.release(prev, false)
		return nil, configError(probs)
	}
	gen.warnings = append(s.warnings(cfg, gen, sitePaths), storeWarnings...)
	gen.warnings = append(gen.warnings, gen.revocation.warnings...)
	return gen, nil
}

// adopt puts gen in service, with the session caches and ticket keys it
// was built with.
func (s *Server) adopt(gen *generation) {
	s.gen = gen
	s.adminSettings.Store(gen.admin)
	s.sessionCaches, s.ticketers = gen.sessionCaches, gen.ticketers
	s.shangMiTicketKeys = gen.shangMiTicketKeys
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
	g.revocation.start(prev)
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
	g.revocation.release(keep)
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
		st.tlcp = edge.OuterTLCP(st.sites)
	}
	if lc.Protocol == config.ProtocolTLS || lc.Protocol == config.ProtocolAuto {
		st.tls = edge.OuterTLS(st.sites)
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

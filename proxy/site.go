package proxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp"
)

// siteSpec is what building a site needs from the configuration.
type siteSpec struct {
	lc     config.Listener
	li, si int
	cfg    config.Site
}

func (sp siteSpec) source() string {
	if sp.cfg.Implicit {
		return sp.lc.Name
	}
	return sp.lc.Name + "/" + sp.cfg.Name
}

// sessionContext names what a site's TLCP sessions belong to: the
// listener in the flat form, listener/site otherwise, so that a session
// made on one site never resumes on another.
func (sp siteSpec) sessionContext() string { return sp.source() }

// sites lists the sites of the listeners of cfg that serve TLCP or TLS.
func tlsSites(cfg *config.Config) []siteSpec {
	var out []siteSpec
	for i, lc := range cfg.Listeners {
		if lc.Protocol == config.ProtocolHTTP || lc.Protocol == config.ProtocolTCP {
			continue
		}
		for j, sc := range lc.SiteList() {
			out = append(out, siteSpec{lc: lc, li: i, si: j, cfg: sc})
		}
	}
	return out
}

// servesTLCP and servesTLS say which of a site's sections its listener's
// protocol uses.
func (sp siteSpec) servesTLCP() bool {
	return sp.cfg.TLCP != nil && (sp.lc.Protocol == config.ProtocolTLCP || sp.lc.Protocol == config.ProtocolAuto)
}

// servesTLS says whether the site serves crypto/tls: a tls section with
// a certificate (files or ACME), not an SM2 identity alone.
func (sp siteSpec) servesTLS() bool {
	return sp.cfg.TLS.HasStandard() && (sp.lc.Protocol == config.ProtocolTLS || sp.lc.Protocol == config.ProtocolAuto)
}

// buildSite makes one site of a listener with its TLCP and TLS
// configurations.
func (s *Server) buildSite(sp siteSpec, gen *generation) (*route.Site, error) {
	lc, sc := sp.lc, sp.cfg
	st := &route.Site{
		Name:      sc.Name,
		Implicit:  sc.Implicit,
		Source:    sp.source(),
		IsDefault: sc.Default,
		Router:    &route.Router{},
	}
	if sc.SessionHeaders != nil {
		st.Headers = *sc.SessionHeaders
	}
	st.Forwarding = forward.NewHeaderPolicy(st.Headers, forward.IdentityHeaderNames(gen.cfg))
	for _, h := range sc.Hosts {
		st.Hosts = append(st.Hosts, hostname.Pattern(h))
	}
	for v := range st.Requests {
		st.Requests[v] = s.metrics.RequestDuration.WithLabelValues(lc.Name, sc.Name, route.HTTPVersions[v])
	}
	st.Router.Routes = compileRoutes(lc, sc.Routes, gen)
	var protos []string
	if lc.ServesHTTP2() {
		protos = append(protos, "h2")
	}
	protos = append(protos, "http/1.1")
	if sp.servesTLCP() {
		tc, err := s.siteTLCP(sp, gen, protos)
		if err != nil {
			return nil, err
		}
		st.TLCP = tc
		st.GMCapableTLCP = sc.GMCapableTLSClients != config.GMCapableTLS
	}
	if sp.servesTLS() {
		tc, err := s.siteTLS(sp, gen, protos)
		if err != nil {
			return nil, err
		}
		st.TLS = tc
	}
	switch {
	case sp.servesSM2():
		tc, err := s.siteSM2(sp, gen, protos)
		if err != nil {
			return nil, err
		}
		st.TLS13, st.TLS13Preferred = tc, sp.cfg.TLS.SM2.TLS13ShangMi == config.TLS13ShangMiPrefer
	case sp.servesShangMi():
		st.TLS13, st.TLS13Preferred = s.siteShangMi(sp, gen, protos, st.TLCP), sp.cfg.TLCP.TLS13ShangMi == config.TLS13ShangMiPrefer
	}
	return st, nil
}

func compileRoutes(lc config.Listener, routes []config.Route, gen *generation) []route.RouteEntry {
	var out []route.RouteEntry
	for _, rc := range routes {
		p := gen.pools[rc.Upstream]
		if p == nil {
			continue // the pool's problem is reported
		}
		// Routes to tcp:// upstreams, and every route of a tcp listener,
		// take whole connections.
		stream := p.Scheme == "tcp" || lc.Protocol == config.ProtocolTCP
		path := rc.Path
		if stream {
			path = ""
		}
		out = append(out, route.RouteEntry{Host: hostname.Pattern(rc.Host), Path: path, Upstream: p, Stream: stream})
	}
	return out
}

func (s *Server) siteTLCP(sp siteSpec, gen *generation, protos []string) (*tlcp.Config, error) {
	t, source, store := sp.cfg.TLCP, sp.source(), gen.store
	tc := &tlcp.Config{
		GetCertificate: func(*tlcp.ClientHelloInfo) (*tlcp.Certificate, error) {
			if c := store.TLCPCertificate(source); c != nil {
				return c, nil
			}
			return nil, errors.New("no TLCP certificate for " + source)
		},
		ClientAuth:                  edge.TlcpClientAuth(t.ClientAuth),
		AcceptServerAuthClientCerts: t.AcceptServerAuthClientCerts,
		SessionContext:              sp.sessionContext(),
		NextProtos:                  protos,
	}
	if cache := s.sessionCache(gen, source, t.SessionCache, sp.lc.SharedSessions); cache != nil {
		tc.SessionCache = cache
	} else {
		tc.SessionsDisabled = true
	}
	suites, err := s.siteSuites(sp, store)
	if err != nil {
		return nil, err
	}
	tc.CipherSuites = suites
	if t.ClientCA != "" {
		pool, err := edge.LoadSMPool(t.ClientCA)
		if err != nil {
			return nil, &config.FieldError{Path: config.Field(sp.cfg.Path(), "tlcp.client_ca"), Err: err}
		}
		tc.ClientCAs = pool
	}
	if chk := gen.revocation.checker(s, siteScope(sp, "tlcp"), config.Field(sp.cfg.Path(), "tlcp.client_revocation"), t.ClientRevocation, []string{t.ClientCA}, gen.cfg, false); chk != nil {
		tc.VerifyConnection = verifyTLCPRevocation(chk)
	}
	return tc, nil
}

func (s *Server) siteTLS(sp siteSpec, gen *generation, protos []string) (*tls.Config, error) {
	t, source, store := sp.cfg.TLS, sp.source(), gen.store
	tc := &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := store.TLSCertificate(source); c != nil {
				return c, nil
			}
			return nil, errors.New("no TLS certificate for " + source)
		},
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		ClientAuth: edge.TlsClientAuth(t.ClientAuth),
	}
	if a := gen.acme[source]; a != nil {
		tc.GetCertificate = a.mgr.GetCertificate
		tc.NextProtos = append(tc.NextProtos, edge.ACMETLSProtocol)
	}
	if t.MinVersion == "1.3" {
		tc.MinVersion = tls.VersionTLS13
	}
	var caPEM []byte
	if t.ClientCA != "" {
		pem, err := certs.ReadCAFile("client_ca", t.ClientCA)
		if err != nil {
			return nil, &config.FieldError{Path: config.Field(sp.cfg.Path(), "tls.client_ca"), Err: err}
		}
		pool, err := certs.TLSCAPool(t.ClientCA, pem)
		if err != nil {
			return nil, &config.FieldError{Path: config.Field(sp.cfg.Path(), "tls.client_ca"), Err: err}
		}
		tc.ClientCAs = pool
		caPEM = pem
	}
	if chk := s.tlsClientRevocation(sp, gen); chk != nil {
		tc.VerifyConnection = verifyTLSRevocation(chk)
	}
	s.bindTickets(gen, tc, source, sp.lc.SharedSessions, t.ClientAuth, caPEM)
	return tc, nil
}

// bindTickets makes the site's TLS session tickets its own. crypto/tls
// would seal every ticket of a listener with the keys of the listener's
// outer configuration, whatever configuration GetConfigForClient chose,
// and resume it on any site: here each site seals with the keys of its
// own ticketer (kept across reloads and rotated by crypto/tls, or with
// shared_sessions derived from the session store's keys for this site)
// and marks the session with a digest of the listener, the site and its
// client authentication policy; a ticket without that mark is not
// resumed, so a session made on one site, or under a laxer policy, never
// resumes on another.
func (s *Server) bindTickets(gen *generation, tc *tls.Config, source string, shared bool, clientAuth string, caPEM []byte) {
	ticketer := gen.ticketers[source]
	if ticketer == nil {
		ticketer = &tls.Config{}
		gen.ticketers[source] = ticketer
	}
	if shared && gen.shared != nil {
		ticketer = &tls.Config{}
		gen.shareTickets(ticketer, source, true)
	}
	h := sha256.New()
	for _, f := range [][]byte{[]byte("gmgate tls session"), []byte(source), []byte(clientAuth), caPEM} {
		fmt.Fprintf(h, "%d:", len(f))
		h.Write(f)
	}
	mark := h.Sum(nil)
	tc.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		ss.Extra = append(ss.Extra, mark)
		return ticketer.EncryptTicket(cs, ss)
	}
	tc.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := ticketer.DecryptTicket(identity, cs)
		if ss == nil || err != nil {
			return nil, err
		}
		for _, e := range ss.Extra {
			if bytes.Equal(e, mark) {
				return ss, nil
			}
		}
		return nil, nil
	}
}

// siteSuites returns a site's TLCP suites. The ECDHE suites need SM2 key
// agreement with the encryption key, which keys on a crypto card do not
// offer: an explicit list with ECDHE suites is then refused with what to
// change, and the default list loses its ECDHE suites (said in the log).
func (s *Server) siteSuites(sp siteSpec, store *certs.Store) ([]uint16, error) {
	t := sp.cfg.TLCP
	var suites, ecdhe []uint16
	for _, n := range t.Suites {
		id, _ := tlcp.CipherSuiteByName(n)
		suites = append(suites, id)
		for _, cs := range tlcp.CipherSuites() {
			if cs.ID == id && cs.ECDHE {
				ecdhe = append(ecdhe, id)
			}
		}
	}
	var cert *tlcp.Certificate
	if store != nil {
		cert = store.TLCPCertificate(sp.source())
	}
	// Without a key (an offline check) the key's abilities are unknown.
	if len(ecdhe) == 0 || cert == nil || cert.EncKey == nil || accel.SupportsKeyAgreement(cert.EncKey) {
		return suites, nil
	}
	if !t.SuitesDefaulted {
		return nil, &config.FieldError{Path: config.Field(sp.cfg.Path(), "tlcp.suites"), Err: accel.RequireKeyAgreement(t.EncKey, cert.EncKey)}
	}
	kept := slices.DeleteFunc(suites, func(id uint16) bool { return slices.Contains(ecdhe, id) })
	s.log.Info("ECDHE suites disabled: the encryption key cannot do SM2 key agreement", "listener", sp.lc.Name, "site", sp.cfg.Name, "suites", len(kept))
	return kept, nil
}

package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/admin"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
)

// adminSettings are the admin listener's access control as one
// configuration sets it: the bearer tokens, and the TLS and TLCP
// identities and client CAs when it speaks those.
type adminSettings struct {
	access admin.Access
	tls    *tls.Config  // nil: no TLS
	tlcp   *tlcp.Config // nil: no TLCP
}

// buildAdmin reads admin.token_file and the admin listener's TLS and
// TLCP files. Offline (config check --offline) reads no secret file.
func buildAdmin(cfg *config.Config, offline bool) (*adminSettings, []config.Problem) {
	a := cfg.Admin
	as := &adminSettings{access: admin.Access{WriteActions: a.WriteActions, ClientCerts: a.ClientCA != "" && (a.Cert != "" || a.TLCP != nil)}}
	if a.Listen == "off" || offline {
		return as, nil
	}
	var probs []config.Problem
	if a.TokenFile != "" {
		toks, err := admin.ReadTokenFile(a.TokenFile)
		if err != nil {
			probs = append(probs, cfg.Problem("admin.token_file", fmt.Sprintf("%s: %s", a.TokenFile, tokenFileCause(err)), "write a long random token (openssl rand -hex 32) into the file, readable by gmgate only"))
		}
		as.access.Tokens = toks
	}
	var caPEM []byte
	if a.ClientCA != "" {
		var err error
		if caPEM, err = os.ReadFile(a.ClientCA); err != nil {
			probs = append(probs, cfg.Problem("admin.client_ca", fmt.Sprintf("%s: %v", a.ClientCA, err), "give the PEM file of the CA that issues the admin clients' certificates"))
		}
	}
	// With a token, a client may come with either.
	verify := a.ClientCA != "" && a.TokenFile == ""
	if a.Cert != "" && a.Key != "" {
		pair, err := tls.LoadX509KeyPair(a.Cert, a.Key)
		if err != nil {
			probs = append(probs, cfg.Problem("admin.cert", fmt.Sprintf("the admin listener's certificate and key do not load: %v", err), "give a PEM certificate and its PEM private key"))
		}
		as.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if a.ClientCA != "" {
			pool := x509.NewCertPool()
			// An SM2 CA in the file (for TLCP clients) is no CA for TLS.
			if caPEM != nil && !pool.AppendCertsFromPEM(caPEM) && a.TLCP == nil {
				probs = append(probs, cfg.Problem("admin.client_ca", a.ClientCA+": no PEM certificate crypto/tls can use (RSA or ECDSA) in it", "give the PEM file of the CA that issues the admin clients' certificates"))
			}
			as.tls.ClientCAs = pool
			as.tls.ClientAuth = tls.VerifyClientCertIfGiven
			if verify {
				as.tls.ClientAuth = tls.RequireAndVerifyClientCert
			}
		}
	}
	if t := a.TLCP; t != nil {
		pair, _, err := certs.LoadTLCPFiles(certs.TLCPFiles{SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey}, certs.LoadOptions{})
		if err != nil {
			probs = append(probs, cfg.Problem("admin.tlcp", fmt.Sprintf("the admin listener's TLCP certificates and keys do not load: %v", err), "give the SM2 signing and encryption certificates and keys (gmgate cert issue makes them)"))
		} else {
			as.tlcp = &tlcp.Config{Certificates: []tlcp.Certificate{*pair}}
			if a.ClientCA != "" {
				pool := smx509.NewCertPool()
				if caPEM != nil && !pool.AppendCertsFromPEM(caPEM) {
					probs = append(probs, cfg.Problem("admin.client_ca", a.ClientCA+": no PEM certificate in it", "give the PEM file of the CA that issues the admin clients' certificates"))
				}
				as.tlcp.ClientCAs = pool
				as.tlcp.ClientAuth = tlcp.VerifyClientCertIfGiven
				if verify {
					as.tlcp.ClientAuth = tlcp.RequireAndVerifyClientCert
				}
			}
		}
	}
	return as, probs
}

// tokenFileCause says what is wrong with the token file without quoting
// it: the path and the kind of error, never the content.
func tokenFileCause(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// adminTLSConfig serves the admin listener's TLS from the generation in
// service, so that a reload changes its certificate and client CA.
// A reload that drops admin.cert keeps the certificate the listener
// started with: whether it speaks TLS changes on restart only.
func (s *Server) adminTLSConfig(started *tls.Config) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if as := s.adminSettings.Load(); as != nil && as.tls != nil {
			return as.tls, nil
		}
		return started, nil
	}}
}

// maxReloadHistory bounds the reload records kept.
const maxReloadHistory = 50

// reloadHistory is what the admin API shows of the configuration's
// life: the generation in service and the last reload attempts.
type reloadHistory struct {
	mu         sync.Mutex
	path       string
	generation int
	loadedAt   time.Time
	records    []admin.ReloadRecord
}

// started notes the first generation.
func (h *reloadHistory) started() {
	h.mu.Lock()
	h.generation, h.loadedAt = 1, time.Now()
	h.mu.Unlock()
}

// note records a reload attempt that ended with err.
func (h *reloadHistory) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := admin.ReloadRecord{Time: time.Now().UTC(), Result: "success"}
	if err != nil {
		r.Result = "failure"
		for _, p := range problemsOf(err) {
			r.Problems = append(r.Problems, p.String())
		}
		if len(r.Problems) == 0 {
			r.Problems = []string{err.Error()}
		}
	} else {
		h.generation++
		h.loadedAt = r.Time
	}
	r.Generation = h.generation
	if len(h.records) == maxReloadHistory {
		h.records = slices.Delete(h.records, 0, 1)
	}
	h.records = append(h.records, r)
}

// adminState is the admin API's view of s.
type adminState struct{ s *Server }

var _ admin.State = adminState{}

func (a adminState) Config() admin.ConfigInfo {
	h := &a.s.history
	h.mu.Lock()
	defer h.mu.Unlock()
	return admin.ConfigInfo{File: h.path, Generation: h.generation, LoadedAt: h.loadedAt, Reloads: slices.Clone(h.records)}
}

func (a adminState) Listeners() []admin.ListenerInfo {
	gen := a.s.current()
	var out []admin.ListenerInfo
	for _, lc := range gen.cfg.Listeners {
		li := admin.ListenerInfo{Name: lc.Name, Listen: lc.Listen, Protocol: lc.Protocol}
		if addr := a.s.Addr(lc.Name); addr != nil {
			li.Listen = addr.String()
		}
		if lc.Protocol == config.ProtocolHTTP || lc.Protocol == config.ProtocolTCP {
			out = append(out, li)
			continue
		}
		for _, sc := range lc.SiteList() {
			si := admin.SiteInfo{Name: sc.Name, Hosts: sc.Hosts, Default: sc.Default, Protocols: []string{}}
			if t := sc.TLCP; t != nil && lc.Protocol != config.ProtocolTLS {
				si.Protocols = append(si.Protocols, "tlcp")
				si.TLCPSuites, si.TLCPClientAuth = t.Suites, t.ClientAuth
			}
			if t := sc.TLS; t != nil && lc.Protocol != config.ProtocolTLCP {
				si.Protocols = append(si.Protocols, "tls")
				si.TLSMinVersion, si.TLSClientAuth = t.MinVersion, t.ClientAuth
			}
			for _, r := range sc.Routes {
				if !slices.Contains(si.Upstreams, r.Upstream) {
					si.Upstreams = append(si.Upstreams, r.Upstream)
				}
			}
			li.Sites = append(li.Sites, si)
		}
		out = append(out, li)
	}
	return out
}

func (a adminState) Certificates() []certs.ServedCertificate {
	return a.s.current().store.Served()
}

func (a adminState) Revocation() []admin.RevocationScope {
	rs := a.s.current().revocation
	if rs == nil {
		return nil
	}
	out := make([]admin.RevocationScope, 0, len(rs.runs))
	for _, scope := range slices.Sorted(maps.Keys(rs.runs)) {
		chk := rs.runs[scope].chk
		checks := "client"
		if strings.HasPrefix(scope, upstream.Source("")) {
			checks = "upstream"
		}
		out = append(out, admin.RevocationScope{Scope: scope, Checks: checks, Policy: string(chk.Policy()), Sources: chk.Sources()})
	}
	return out
}

func (a adminState) Upstreams() []admin.UpstreamInfo {
	gen := a.s.current()
	now := time.Now()
	names := make([]string, 0, len(gen.pools))
	for name := range gen.pools {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]admin.UpstreamInfo, 0, len(names))
	for _, name := range names {
		p := gen.pools[name]
		ui := admin.UpstreamInfo{Name: name, Scheme: p.Scheme, Policy: p.Cfg.Policy}
		for _, t := range p.Targets {
			ui.Targets = append(ui.Targets, t.State(now))
		}
		out = append(out, ui)
	}
	return out
}

func (a adminState) SessionCaches() admin.SessionInfo {
	gen := a.s.current()
	var si admin.SessionInfo
	if gen.shared != nil {
		si.Store = "redis"
	}
	shared := map[string]bool{}
	for _, lc := range gen.cfg.Listeners {
		shared[lc.Name] = lc.SharedSessions
	}
	// One cache per certificate source (listener/site), kept across
	// reloads.
	for source, c := range gen.sessionCaches {
		listener, _, _ := strings.Cut(source, "/")
		si.Caches = append(si.Caches, admin.SessionCacheInfo{Source: source, Size: c.size, LifetimeSeconds: c.lifetime.Seconds(), Shared: shared[listener] && gen.shared != nil})
	}
	sort.Slice(si.Caches, func(i, j int) bool { return si.Caches[i].Source < si.Caches[j].Source })
	return si
}

func (a adminState) Reload() error {
	path := a.s.history.configPath()
	if path == "" {
		return errors.New("the gateway was not started from a configuration file")
	}
	return a.s.reloadFile(path)
}

func (a adminState) SetDrained(up, target string, drained bool) (bool, error) {
	p := a.s.current().pools[up]
	if p == nil {
		return false, admin.ErrNotFound
	}
	t := p.Target(target)
	if t == nil {
		return false, admin.ErrNotFound
	}
	changed := t.SetDrained(drained)
	p.UpdateHealthy()
	if changed {
		verb := "drained"
		if !drained {
			verb = "undrained"
		}
		a.s.log.Info("upstream target "+verb, "upstream", up, "target", t.Addr)
	}
	return changed, nil
}

func (h *reloadHistory) configPath() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.path
}

// noteFailure keeps a failed handshake for the admin API, with what its
// log line says.
func (s *Server) noteFailure(listener string, client net.Addr, info *forward.ConnInfo, err error, d time.Duration) {
	f := observe.HandshakeFailure{
		Time: time.Now().UTC(), Listener: listener, Client: forward.AddrString(client),
		Protocol: info.Protocol, Result: edge.HandshakeResult(err), SNI: info.SNI, Site: info.Site,
		Cause: err.Error(), DurationMS: observe.Millis(d),
	}
	if dir, alert, ok := observe.HandshakeAlert(err); ok {
		f.Alert = dir + " " + alert
	}
	s.metrics.Failures.Add(f)
}

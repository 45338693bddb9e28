package proxy

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/tcplisten"
)

// Reload replaces the configuration without dropping connections:
// listeners whose address is unchanged keep their socket and take the new
// routes, certificates and limits; new listeners are bound; removed ones
// stop accepting and their connections finish. A configuration that
// cannot be set up leaves the running one in place.
func (s *Server) Reload(cfg *config.Config) error {
	err := s.reload(cfg)
	s.history.note(err)
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
	if (cfg.Admin.Cert != "") != s.adminTLS && cfg.Admin.Listen != "off" {
		s.log.Warn("admin.cert changes whether the admin listener speaks TLS on restart only", "running_tls", s.adminTLS)
	}
	if (cfg.Admin.TLCP != nil) != s.adminTLCP && cfg.Admin.Listen != "off" {
		s.log.Warn("admin.tlcp changes whether the admin listener speaks TLCP on restart only", "running_tlcp", s.adminTLCP)
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

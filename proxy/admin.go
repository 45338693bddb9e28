package proxy

import (
	"net/http"
	"net/http/pprof"

	"github.com/gmgate/gmgate/internal/admin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHandler serves /metrics, /healthz (the process is alive) and
// /readyz (it accepts new connections: not draining), Go's profiles
// under /debug/pprof/ while admin.pprof is on, and the API and console
// of package admin, all behind its access control.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	s.api = admin.New(admin.Options{State: adminState{s}, Metrics: s.metrics, Log: s.log, Access: func() *admin.Access {
		return &s.adminSettings.Load().access
	}})
	s.api.Mount(mux)
	mux.Handle("/debug/pprof/", s.whenPprof(pprof.Index))
	mux.Handle("/debug/pprof/cmdline", s.whenPprof(pprof.Cmdline))
	mux.Handle("/debug/pprof/profile", s.whenPprof(pprof.Profile))
	mux.Handle("/debug/pprof/symbol", s.whenPprof(pprof.Symbol))
	mux.Handle("/debug/pprof/trace", s.whenPprof(pprof.Trace))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{ErrorLog: s.stdErrorLog}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return s.api.Protect(mux)
}

// whenPprof serves h while admin.pprof is on (a reload turns it on and
// off), and 404 otherwise.
func (s *Server) whenPprof(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.pprof.Load() {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})
}

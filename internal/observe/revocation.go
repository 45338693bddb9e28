package observe

import "github.com/prometheus/client_golang/prometheus"

// RevocationMetrics count what revocation checks decide and show the
// state of their sources (CRLs, OCSP responders), by scope: the site and
// protocol whose client certificates are checked (LISTENER/tlcp,
// LISTENER/SITE/tls) or the upstream whose targets' are
// (upstreams.NAME).
type RevocationMetrics struct {
	refused  *prometheus.CounterVec
	admitted *prometheus.CounterVec
	sources  *prometheus.GaugeVec
}

func newRevocationMetrics() *RevocationMetrics {
	return &RevocationMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gmgate_revocation_refused_total",
			Help: "Certificates refused by a revocation check, by scope and status: revoked, or unknown (no current CRL or OCSP answer, under policy fail_closed).",
		}, []string{"scope", "status"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gmgate_revocation_unknown_admitted_total",
			Help: "Certificates admitted with an unknown revocation status under policy fail_open, by scope.",
		}, []string{"scope"}),
		sources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gmgate_revocation_sources",
			Help: "CRL sources and OCSP responders of a scope by state: ok, failing (not read, last answer still current), stale (past nextUpdate, within the grace), expired (nothing usable).",
		}, []string{"scope", "state"}),
	}
}

func (r *RevocationMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.refused, r.admitted, r.sources}
}

// Refused counts a certificate refused with status (revoked, unknown).
func (r *RevocationMetrics) Refused(scope, status string) {
	r.refused.WithLabelValues(scope, status).Inc()
}

// AdmittedUnknown counts a certificate admitted with an unknown status.
func (r *RevocationMetrics) AdmittedUnknown(scope string) {
	r.admitted.WithLabelValues(scope).Inc()
}

// SetSources sets how many of a scope's sources are in each state.
func (r *RevocationMetrics) SetSources(scope string, byState map[string]int) {
	for state, n := range byState {
		r.sources.WithLabelValues(scope, state).Set(float64(n))
	}
}

// Forget drops the series of a scope no configuration has any more.
func (r *RevocationMetrics) Forget(scope string) {
	r.sources.DeletePartialMatch(prometheus.Labels{"scope": scope})
}

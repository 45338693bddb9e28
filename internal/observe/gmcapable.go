package observe

import "github.com/prometheus/client_golang/prometheus"

// gmCapableLabels are the labels of gmgate_gm_capable_tls_hellos_total.
type gmCapableLabels struct{ listener, site, outcome string }

func newGMCapableCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_gm_capable_tls_hellos_total",
		Help: "TLS ClientHellos that offered TLCP cipher suites (GM browsers), on tlcp and auto listeners, by listener, site (empty when none was chosen) and outcome: tlcp (answered in TLCP), tls (left to TLS) or refused (handshake_failure, so that the browser retries in TLCP).",
	}, []string{"listener", "site", "outcome"})
}

// GMCapableHello counts a TLS ClientHello that offered TLCP suites by
// what it got (outcome); an empty outcome, a hello that offered none, is
// not counted.
func (m *Metrics) GMCapableHello(listener, site, outcome string) {
	if outcome == "" {
		return
	}
	if site != "" {
		m.OfferedGM(site) // the admin API's migration view
	}
	key := gmCapableLabels{listener, site, outcome}
	c, ok := m.gmCapableSeries.Load(key)
	if !ok {
		c, _ = m.gmCapableSeries.LoadOrStore(key, m.gmCapable.WithLabelValues(listener, site, outcome))
	}
	c.(prometheus.Counter).Inc()
}

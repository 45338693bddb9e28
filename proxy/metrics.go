package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/accel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the gateway's Prometheus metrics, on a registry of their own
// so that several servers (tests) do not collide.
type Metrics struct {
	Registry *prometheus.Registry

	handshakes        *prometheus.CounterVec
	handshakeDuration *prometheus.HistogramVec
	connsActive       *prometheus.GaugeVec
	connsRefused      *prometheus.CounterVec
	handshakesResumed *prometheus.CounterVec
	upstreamRequests  *prometheus.CounterVec
	upstreamFailures  *prometheus.CounterVec
	upstreamTLCP      *prometheus.CounterVec
	upstreamDuration  *prometheus.HistogramVec
	upstreamHealthy   *prometheus.GaugeVec
	// upstreamConnsInUse, upstreamWaiting and upstreamRefused are the
	// slots of max_conns_per_target (targetslots.go).
	upstreamConnsInUse *prometheus.GaugeVec
	upstreamWaiting    *prometheus.GaugeVec
	upstreamRefused    *prometheus.CounterVec
	requestDuration    *prometheus.HistogramVec
	reloads            *prometheus.CounterVec

	accelOps      *prometheus.CounterVec
	accelDuration *prometheus.HistogramVec
	accelWait     *prometheus.HistogramVec
	accelInUse    *prometheus.GaugeVec

	// certs is the collector of the certificate store in service.
	certs atomic.Pointer[prometheus.Collector]
	// acme are the collectors of the ACME managers in service.
	acme atomic.Pointer[[]prometheus.Collector]
	// store are the session store's, registered with the first store.
	store storeMetrics

	// handshakeSeries and resumedSeries hold the handles of the series
	// that connections count into, by labels, so that a connection does
	// not look its labels up again.
	handshakeSeries sync.Map // handshakeLabels -> *handshakeHandles
	resumedSeries   sync.Map // protocol -> prometheus.Counter
}

type handshakeLabels struct{ protocol, suite, site, result string }

type handshakeHandles struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// latencyBuckets run from 100µs to 10s: SM2 handshakes take about a
// millisecond in software and tens of milliseconds on a busy card.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_handshakes_total",
		Help: "Client handshakes by protocol (tlcp, tls1.2, tls1.3), cipher suite, site (empty before one was chosen) and result (ok, or why it failed).",
	}, []string{"protocol", "suite", "site", "result"})
	m.handshakeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_handshake_duration_seconds",
		Help:    "Time from the first byte of a client handshake to its end, by protocol and result.",
		Buckets: latencyBuckets,
	}, []string{"protocol", "result"})
	m.connsActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_connections_active",
		Help: "Client connections open, by listener.",
	}, []string{"listener"})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_connections_refused_total",
		Help: "Client connections closed unserved because a limit was reached (max_connections, max_handshakes) or the PROXY header was refused.",
	}, []string{"listener", "reason"})
	m.upstreamRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_requests_total",
		Help: "Requests (or TCP connections) sent to upstreams, by upstream and response code (error when none came back).",
	}, []string{"upstream", "code"})
	m.handshakesResumed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_handshakes_resumed_total",
		Help: "Client handshakes that resumed a session, by protocol; a part of the ok handshakes of gmgate_handshakes_total.",
	}, []string{"protocol"})
	m.upstreamFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_failures_total",
		Help: "Requests (or TCP connections) that got no response from an upstream target, by upstream, the step that failed (connect, handshake, request) and why (timeout, refused, closed, alert_sent_X or alert_received_X for a handshake alert, ...).",
	}, []string{"upstream", "stage", "reason"})
	m.upstreamTLCP = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_handshakes_total",
		Help: "TLCP handshakes completed with tlcp:// upstream targets, by upstream, cipher suite and whether a session was resumed.",
	}, []string{"upstream", "suite", "resumed"})
	m.upstreamDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_upstream_response_duration_seconds",
		Help:    "Time from sending a request to an upstream to its response header.",
		Buckets: latencyBuckets,
	}, []string{"upstream"})
	m.upstreamHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_targets_healthy",
		Help: "Targets of an upstream that are in service (not failed by health checks nor ejected).",
	}, []string{"upstream"})
	m.upstreamConnsInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_connections_in_use",
		Help: "Requests in flight to an upstream target, each holding one of its max_conns_per_target: a connection over HTTP/1.1, a stream over HTTP/2.",
	}, []string{"upstream", "target"})
	m.upstreamWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_requests_waiting",
		Help: "Requests waiting for a connection to an upstream target, all of its max_conns_per_target being in use.",
	}, []string{"upstream", "target"})
	m.upstreamRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_requests_refused_total",
		Help: "Requests answered 503 because every connection to their upstream target was in use, by why they could not wait (queue_full, queue_timeout).",
	}, []string{"upstream", "target", "reason"})
	m.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_request_duration_seconds",
		Help:    "Time to serve an HTTP request, from its header to the end of the response, by listener, site and HTTP version (1.1, 2).",
		Buckets: latencyBuckets,
	}, []string{"listener", "site", "http_version"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_config_reloads_total",
		Help: "Configuration reloads by result (success, failure).",
	}, []string{"result"})
	m.accelOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_accel_ops_total",
		Help: "Private-key operations by key backend, operation (sign, decrypt) and result (ok, timeout, pool_exhausted, device_error, closed, error).",
	}, []string{"backend", "op", "result"})
	m.accelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_accel_op_duration_seconds",
		Help:    "Duration of private-key operations by backend and operation.",
		Buckets: latencyBuckets,
	}, []string{"backend", "op"})
	m.accelWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_accel_pool_wait_seconds",
		Help:    "Time a key operation waited for a backend session.",
		Buckets: latencyBuckets,
	}, []string{"backend"})
	m.accelInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_accel_pool_in_use",
		Help: "Backend sessions in use.",
	}, []string{"backend"})
	m.Registry.MustRegister(
		m.handshakes, m.handshakeDuration, m.connsActive, m.connsRefused,
		m.handshakesResumed, m.upstreamRequests, m.upstreamFailures, m.upstreamTLCP, m.upstreamDuration, m.upstreamHealthy, m.requestDuration, m.reloads,
		m.upstreamConnsInUse, m.upstreamWaiting, m.upstreamRefused,
		m.accelOps, m.accelDuration, m.accelWait, m.accelInUse,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		certsCollector{m},
	)
	return m
}

// certsCollector forwards to the certificate store in service, which
// changes when a reload replaces it. It is an unchecked collector: the
// store describes its own metrics.
type certsCollector struct{ m *Metrics }

func (certsCollector) Describe(chan<- *prometheus.Desc) {}

func (c certsCollector) Collect(ch chan<- prometheus.Metric) {
	if p := c.m.certs.Load(); p != nil {
		(*p).Collect(ch)
	}
	if p := c.m.acme.Load(); p != nil {
		for _, a := range *p {
			a.Collect(ch)
		}
	}
}

func (m *Metrics) setCerts(c prometheus.Collector) { m.certs.Store(&c) }

func (m *Metrics) setACME(c []prometheus.Collector) { m.acme.Store(&c) }

func (m *Metrics) handshake(protocol, suite, site, result string, d time.Duration) {
	key := handshakeLabels{protocol, suite, site, result}
	h, ok := m.handshakeSeries.Load(key)
	if !ok {
		h, _ = m.handshakeSeries.LoadOrStore(key, &handshakeHandles{
			count:    m.handshakes.WithLabelValues(protocol, suite, site, result),
			duration: m.handshakeDuration.WithLabelValues(protocol, result),
		})
	}
	hh := h.(*handshakeHandles)
	hh.count.Inc()
	hh.duration.Observe(d.Seconds())
}

// resumed counts a resumed handshake of protocol.
func (m *Metrics) resumed(protocol string) {
	c, ok := m.resumedSeries.Load(protocol)
	if !ok {
		c, _ = m.resumedSeries.LoadOrStore(protocol, m.handshakesResumed.WithLabelValues(protocol))
	}
	c.(prometheus.Counter).Inc()
}

// upstreamResult counts a request (or TCP connection) sent to an
// upstream by its response code, or its failure by step and reason.
func (m *Metrics) upstreamResult(upstream string, code int, err error) {
	label := "error"
	if err == nil {
		label = strconv.Itoa(code)
	} else if !noTargetFault(err) {
		stage, reason := upstreamFailure(err)
		m.upstreamFailures.WithLabelValues(upstream, stage, reason).Inc()
	}
	m.upstreamRequests.WithLabelValues(upstream, label).Inc()
}

// upstreamCounters are the handles of a pool's per-request metrics,
// looked up once rather than for every request.
type upstreamCounters struct {
	duration prometheus.Observer
	// codes are gmgate_upstream_requests_total by response code, filled
	// in as codes are seen.
	codes [500]atomic.Pointer[prometheus.Counter]
}

func newUpstreamCounters(m *Metrics, upstream string) *upstreamCounters {
	return &upstreamCounters{duration: m.upstreamDuration.WithLabelValues(upstream)}
}

// responded counts a response of code from the pool's upstream.
func (c *upstreamCounters) responded(m *Metrics, upstream string, code int) {
	if code < 100 || code > 599 {
		m.upstreamResult(upstream, code, nil)
		return
	}
	slot := &c.codes[code-100]
	ctr := slot.Load()
	if ctr == nil {
		cv := m.upstreamRequests.WithLabelValues(upstream, strconv.Itoa(code))
		slot.CompareAndSwap(nil, &cv)
		ctr = slot.Load()
	}
	(*ctr).Inc()
}

// accelObserver feeds accel's key operations into the metrics.
type accelObserver struct{ m *Metrics }

var _ accel.Observer = accelObserver{}

func (o accelObserver) Op(backend, op string, err error, d time.Duration) {
	o.m.accelOps.WithLabelValues(backend, op, accel.Result(err)).Inc()
	o.m.accelDuration.WithLabelValues(backend, op).Observe(d.Seconds())
}

func (o accelObserver) PoolWait(backend string, d time.Duration) {
	o.m.accelWait.WithLabelValues(backend).Observe(d.Seconds())
}

func (o accelObserver) PoolInUse(backend string, delta int) {
	o.m.accelInUse.WithLabelValues(backend).Add(float64(delta))
}

package observe

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/internal/sessionstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the gateway's Prometheus metrics, on a registry of their own
// so that several servers (tests) do not collide.
type Metrics struct {
	Registry *prometheus.Registry

	handshakes        *prometheus.CounterVec
	handshakeDuration *prometheus.HistogramVec
	ConnsActive       *prometheus.GaugeVec
	ConnsRefused      *prometheus.CounterVec
	handshakesResumed *prometheus.CounterVec
	handshakeGroups   *prometheus.CounterVec
	UpstreamRequests  *prometheus.CounterVec
	upstreamFailures  *prometheus.CounterVec
	UpstreamTLCP      *prometheus.CounterVec
	// UpstreamTLCPProfile is the client profile each tlcp:// target takes.
	UpstreamTLCPProfile *prometheus.GaugeVec
	upstreamDuration    *prometheus.HistogramVec
	UpstreamHealthy     *prometheus.GaugeVec
	// upstreamConnsInUse, upstreamWaiting and upstreamRefused are the
	// slots of max_conns_per_target (targetslots.go).
	UpstreamConnsInUse *prometheus.GaugeVec
	UpstreamWaiting    *prometheus.GaugeVec
	UpstreamRefused    *prometheus.CounterVec
	RequestDuration    *prometheus.HistogramVec
	Reloads            *prometheus.CounterVec
	// Revocation are the revocation checks' metrics.
	Revocation *RevocationMetrics

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

	// gmCapable counts TLS ClientHellos that offered TLCP suites
	// (gmcapable.go), with its series' handles by labels.
	gmCapable       *prometheus.CounterVec
	gmCapableSeries sync.Map // gmCapableLabels -> prometheus.Counter
	groupSeries     sync.Map // groupLabels -> prometheus.Counter
	// Window counts the last hour's connections and requests for the
	// admin API's migration view; Failures keeps the last failed
	// handshakes (window.go, failures.go).
	Window   *Window
	Failures *FailureRing
}

type groupLabels struct{ protocol, group string }

type handshakeLabels struct{ protocol, suite, site, result string }

type handshakeHandles struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// latencyBuckets run from 100µs to 10s: SM2 handshakes take about a
// millisecond in software and tens of milliseconds on a busy card.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), Window: NewWindow(), Failures: NewFailureRing(RecentFailures)}
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_handshakes_total",
		Help: "Client handshakes by protocol (tlcp, tls1.2, tls1.3), cipher suite, site (empty before one was chosen) and result (ok, or why it failed).",
	}, []string{"protocol", "suite", "site", "result"})
	m.handshakeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_handshake_duration_seconds",
		Help:    "Time from the first byte of a client handshake to its end, by protocol and result.",
		Buckets: latencyBuckets,
	}, []string{"protocol", "result"})
	m.ConnsActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_connections_active",
		Help: "Client connections open, by listener.",
	}, []string{"listener"})
	m.ConnsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_connections_refused_total",
		Help: "Client connections closed unserved because a limit was reached (max_connections, max_handshakes) or the PROXY header was refused.",
	}, []string{"listener", "reason"})
	m.UpstreamRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_requests_total",
		Help: "Requests (or TCP connections) sent to upstreams, by upstream and response code (error when none came back).",
	}, []string{"upstream", "code"})
	m.handshakesResumed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_handshakes_resumed_total",
		Help: "Client handshakes that resumed a session, by protocol; a part of the ok handshakes of gmgate_handshakes_total.",
	}, []string{"protocol"})
	m.handshakeGroups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_handshake_groups_total",
		Help: "Client TLS 1.3 handshakes by protocol (tls1.3, tls1.3-sm) and key exchange group (curveSM2, curveSM2MLKEM768, X25519MLKEM768, X25519, ...); a part of the ok handshakes of gmgate_handshakes_total.",
	}, []string{"protocol", "group"})
	m.upstreamFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_failures_total",
		Help: "Requests (or TCP connections) that got no response from an upstream target, by upstream, the step that failed (connect, handshake, request) and why (timeout, refused, closed, alert_sent_X or alert_received_X for a handshake alert, ...).",
	}, []string{"upstream", "stage", "reason"})
	m.UpstreamTLCP = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_handshakes_total",
		Help: "TLCP handshakes completed with tlcp:// upstream targets, by upstream, cipher suite and whether a session was resumed.",
	}, []string{"upstream", "suite", "resumed"})
	m.UpstreamTLCPProfile = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_tlcp_profile",
		Help: "1 for the client profile (standard, gmssl) each tlcp:// upstream target takes: the configured one, or with profile auto the one its last handshake took (0 for both until one did).",
	}, []string{"upstream", "target", "profile"})
	m.upstreamDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_upstream_response_duration_seconds",
		Help:    "Time from sending a request to an upstream to its response header.",
		Buckets: latencyBuckets,
	}, []string{"upstream"})
	m.UpstreamHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_targets_healthy",
		Help: "Targets of an upstream that are in service (not failed by health checks nor ejected).",
	}, []string{"upstream"})
	m.UpstreamConnsInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_connections_in_use",
		Help: "Requests in flight to an upstream target, each holding one of its max_conns_per_target: a connection over HTTP/1.1, a stream over HTTP/2.",
	}, []string{"upstream", "target"})
	m.UpstreamWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gmgate_upstream_requests_waiting",
		Help: "Requests waiting for a connection to an upstream target, all of its max_conns_per_target being in use.",
	}, []string{"upstream", "target"})
	m.UpstreamRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gmgate_upstream_requests_refused_total",
		Help: "Requests answered 503 because every connection to their upstream target was in use, by why they could not wait (queue_full, queue_timeout).",
	}, []string{"upstream", "target", "reason"})
	m.RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gmgate_request_duration_seconds",
		Help:    "Time to serve an HTTP request, from its header to the end of the response, by listener, site and HTTP version (1.1, 2).",
		Buckets: latencyBuckets,
	}, []string{"listener", "site", "http_version"})
	m.Reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
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
	m.gmCapable = newGMCapableCounter()
	m.Revocation = newRevocationMetrics()
	m.Registry.MustRegister(m.Revocation.collectors()...)
	m.Registry.MustRegister(
		m.gmCapable,
		m.handshakes, m.handshakeDuration, m.ConnsActive, m.ConnsRefused,
		m.handshakesResumed, m.handshakeGroups, m.UpstreamRequests, m.upstreamFailures, m.UpstreamTLCP, m.UpstreamTLCPProfile, m.upstreamDuration, m.UpstreamHealthy, m.RequestDuration, m.Reloads,
		m.UpstreamConnsInUse, m.UpstreamWaiting, m.UpstreamRefused,
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

func (m *Metrics) SetCerts(c prometheus.Collector) { m.certs.Store(&c) }

func (m *Metrics) SetACME(c []prometheus.Collector) { m.acme.Store(&c) }

func (m *Metrics) Handshake(protocol, suite, site, result string, d time.Duration) {
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
	if result == "ok" {
		m.Window.Connection(site, protocol, suite)
	}
}

// resumed counts a resumed handshake of protocol.
func (m *Metrics) Resumed(protocol string) {
	c, ok := m.resumedSeries.Load(protocol)
	if !ok {
		c, _ = m.resumedSeries.LoadOrStore(protocol, m.handshakesResumed.WithLabelValues(protocol))
	}
	c.(prometheus.Counter).Inc()
}

// HandshakeGroup counts a handshake of protocol that agreed its keys
// over group.
func (m *Metrics) HandshakeGroup(protocol, group string) {
	key := groupLabels{protocol, group}
	c, ok := m.groupSeries.Load(key)
	if !ok {
		c, _ = m.groupSeries.LoadOrStore(key, m.handshakeGroups.WithLabelValues(protocol, group))
	}
	c.(prometheus.Counter).Inc()
}

// upstreamResult counts a request (or TCP connection) sent to an
// upstream by its response code, or, when failed, as an error; a failure
// with a stage is counted by step and reason too.
func (m *Metrics) UpstreamResult(upstream string, code int, failed bool, stage, reason string) {
	label := "error"
	if !failed {
		label = strconv.Itoa(code)
	} else if stage != "" {
		m.upstreamFailures.WithLabelValues(upstream, stage, reason).Inc()
	}
	m.UpstreamRequests.WithLabelValues(upstream, label).Inc()
}

// upstreamCounters are the handles of a pool's per-request metrics,
// looked up once rather than for every request.
type UpstreamCounters struct {
	Duration prometheus.Observer
	// codes are gmgate_upstream_requests_total by response code, filled
	// in as codes are seen.
	codes [500]atomic.Pointer[prometheus.Counter]
}

func NewUpstreamCounters(m *Metrics, upstream string) *UpstreamCounters {
	return &UpstreamCounters{Duration: m.upstreamDuration.WithLabelValues(upstream)}
}

// responded counts a response of code from the pool's upstream.
func (c *UpstreamCounters) Responded(m *Metrics, upstream string, code int) {
	if code < 100 || code > 599 {
		m.UpstreamResult(upstream, code, false, "", "")
		return
	}
	slot := &c.codes[code-100]
	ctr := slot.Load()
	if ctr == nil {
		cv := m.UpstreamRequests.WithLabelValues(upstream, strconv.Itoa(code))
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

// storeMetrics are the session store's metrics.
type storeMetrics struct {
	lookups  *prometheus.CounterVec
	writes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	up       prometheus.Gauge

	// Handles by label, resolved once.
	lookup   map[string]prometheus.Counter
	write    map[[2]string]prometheus.Counter
	lookupD  prometheus.Observer
	writeD   prometheus.Observer
	register sync.Once
}

// storeObserver returns the session store's metrics, registered on first
// use: a gateway without a session store has none of them.
func (m *Metrics) StoreObserver() *storeMetrics {
	sm := &m.store
	sm.register.Do(func() {
		sm.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gmgate_session_store_lookups_total",
			Help: "TLCP session lookups of listeners with shared_sessions, by result: local (the local cache had it; Redis not asked), hit, miss, error (failed or timed out: a full handshake), invalid (does not open with the keys), unavailable (Redis known down: not asked).",
		}, []string{"result"})
		sm.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gmgate_session_store_writes_total",
			Help: "Sessions written to (set) or removed from (delete) Redis, by result: ok, error, refused (Redis answered with a refusal: out of memory, read-only, no write right), dropped (queue full), unavailable (Redis known down: kept locally).",
		}, []string{"op", "result"})
		sm.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gmgate_session_store_duration_seconds",
			Help:    "Time of Redis round trips: a session lookup (get), a pipeline of queued writes (write).",
			Buckets: latencyBuckets,
		}, []string{"op"})
		sm.up = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gmgate_session_store_up",
			Help: "1 while Redis answers, 0 while sessions are not shared because it does not.",
		})
		sm.lookup = map[string]prometheus.Counter{}
		for _, r := range []string{sessionstore.LookupLocal, sessionstore.LookupHit, sessionstore.LookupMiss, sessionstore.LookupError, sessionstore.LookupInvalid, sessionstore.LookupUnavailable} {
			sm.lookup[r] = sm.lookups.WithLabelValues(r)
		}
		sm.write = map[[2]string]prometheus.Counter{}
		for _, op := range []string{"set", "delete"} {
			for _, r := range []string{sessionstore.WriteOK, sessionstore.WriteError, sessionstore.WriteRefused, sessionstore.WriteDropped, sessionstore.WriteUnavailable} {
				sm.write[[2]string{op, r}] = sm.writes.WithLabelValues(op, r)
			}
		}
		sm.lookupD = sm.duration.WithLabelValues("get")
		sm.writeD = sm.duration.WithLabelValues("write")
		m.Registry.MustRegister(sm.lookups, sm.writes, sm.duration, sm.up)
	})
	return sm
}

var _ sessionstore.Observer = (*storeMetrics)(nil)

func (sm *storeMetrics) Lookup(result string, d time.Duration) {
	if c := sm.lookup[result]; c != nil {
		c.Inc()
	}
	if d > 0 {
		sm.lookupD.Observe(d.Seconds())
	}
}

func (sm *storeMetrics) Write(op, result string, n int, d time.Duration) {
	if c := sm.write[[2]string{op, result}]; c != nil {
		c.Add(float64(n))
	}
	if d > 0 {
		sm.writeD.Observe(d.Seconds())
	}
}

func (sm *storeMetrics) Up(up bool) {
	if up {
		sm.up.Set(1)
	} else {
		sm.up.Set(0)
	}
}

// AccelObserver returns what feeds accel's key operations into m.
func (m *Metrics) AccelObserver() accel.Observer { return accelObserver{m} }

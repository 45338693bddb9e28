package admin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/gmgate/gmgate/internal/observe"
	dto "github.com/prometheus/client_model/go"
)

// Bounds of every answer: lists longer than maxItems are cut (and say
// so), and an answer never exceeds maxAnswerBytes.
const (
	maxItems       = 500
	maxAnswerBytes = 4 << 20
)

// Options configure a Handler.
type Options struct {
	State State
	// Metrics are the gateway's: the registry /metrics serves, the
	// migration window and the ring of failed handshakes.
	Metrics *observe.Metrics
	Log     *slog.Logger
	// Access returns the admin listener's access control in force (a
	// reload may change it); nil asks for nothing.
	Access func() *Access
	// SampleEvery is how often the cost view samples the counters; 5s
	// when zero.
	SampleEvery time.Duration
	// Now is time.Now unless a test sets it.
	Now func() time.Time
}

// Handler serves the API and the console.
type Handler struct {
	o    Options
	cost *costSampler

	stopOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

// New returns the API and console handler; Close stops its sampler.
func New(o Options) *Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 5 * time.Second
	}
	h := &Handler{o: o, cost: newCostSampler(o.Metrics.Registry, o.Now), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go h.cost.run(ctx, o.SampleEvery, h.done)
	return h
}

func (h *Handler) access() *Access {
	if h.o.Access != nil {
		if a := h.o.Access(); a != nil {
			return a
		}
	}
	return &Access{}
}

// Close stops the sampler and waits for it.
func (h *Handler) Close() {
	h.stopOnce.Do(func() {
		h.stop()
		<-h.done
	})
}

// Mount adds the API under /api/v1/ and the console under /console/ to
// mux, and sends / to the console.
func (h *Handler) Mount(mux *http.ServeMux) {
	get := func(path string, fn func(*http.Request) any) {
		mux.HandleFunc("GET /api/v1/"+path, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, fn(r))
		})
	}
	get("{$}", h.index)
	get("config", h.config)
	get("listeners", h.listeners)
	get("certificates", h.certificates)
	get("upstreams", h.upstreams)
	get("sessions", h.sessions)
	get("accel", h.accel)
	get("handshakes/failures", h.failures)
	get("migration", h.migration)
	get("cost", h.costView)
	mux.HandleFunc("POST /api/v1/reload", h.write("reload", h.reload))
	mux.HandleFunc("POST /api/v1/upstreams/{upstream}/targets/{target}/drain", h.write("drain", h.drain(true)))
	mux.HandleFunc("POST /api/v1/upstreams/{upstream}/targets/{target}/undrain", h.write("undrain", h.drain(false)))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{"no such endpoint; GET /api/v1/ lists them"})
	})
	mux.Handle("GET /console/", consoleHandler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
}

type apiError struct {
	Error string `json:"error"`
}

// writeJSON encodes v; an answer over maxAnswerBytes (which the bounds
// on every list should make impossible) is refused rather than sent.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil || buf.Len() > maxAnswerBytes {
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error": "the answer could not be made within bounds"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// bounded cuts s to maxItems and reports whether it did.
func bounded[T any](s []T) ([]T, bool) {
	if len(s) > maxItems {
		return s[:maxItems], true
	}
	return s, false
}

// endpoints are what GET /api/v1/ lists.
var endpoints = []string{
	"GET /api/v1/config", "GET /api/v1/listeners", "GET /api/v1/certificates",
	"GET /api/v1/upstreams", "GET /api/v1/sessions", "GET /api/v1/accel",
	"GET /api/v1/handshakes/failures", "GET /api/v1/migration", "GET /api/v1/cost",
	"POST /api/v1/reload", "POST /api/v1/upstreams/{upstream}/targets/{target}/drain",
	"POST /api/v1/upstreams/{upstream}/targets/{target}/undrain",
}

func (h *Handler) index(*http.Request) any {
	return map[string]any{"version": "v1", "endpoints": endpoints, "write_actions": h.access().WriteActions}
}

func (h *Handler) config(*http.Request) any {
	c := h.o.State.Config()
	reloads, cut := bounded(c.Reloads)
	if reloads == nil {
		reloads = []ReloadRecord{}
	}
	return map[string]any{
		"file": c.File, "generation": c.Generation, "loaded_at": c.LoadedAt.UTC(),
		"reloads": reloads, "reloads_truncated": cut,
	}
}

func (h *Handler) listeners(*http.Request) any {
	ls, cut := bounded(h.o.State.Listeners())
	if ls == nil {
		ls = []ListenerInfo{}
	}
	return map[string]any{"listeners": ls, "truncated": cut}
}

// certificateView is one served certificate.
type certificateView struct {
	Source     string    `json:"source"`
	Role       string    `json:"role"`
	Subject    string    `json:"subject"`
	SANs       []string  `json:"sans"`
	Issuer     string    `json:"issuer"`
	Serial     string    `json:"serial"`
	KeyType    string    `json:"key_type"`
	KeyBackend string    `json:"key_backend"`
	NotBefore  time.Time `json:"not_before"`
	NotAfter   time.Time `json:"not_after"`
	// DaysLeft is whole days until NotAfter; once expired, minus the
	// whole days since.
	DaysLeft int `json:"days_left"`
	// Revocation is the certificate's own OCSP state, from its stapling:
	// the staple state (good, pending, revoked, unknown, failed,
	// no_issuer), or not_checked for a certificate not stapled.
	Revocation string      `json:"revocation"`
	OCSPStaple *stapleView `json:"ocsp_staple,omitempty"`
}

// stapleView is the OCSP stapling of a served certificate.
type stapleView struct {
	State      string     `json:"state"`
	NextUpdate *time.Time `json:"next_update,omitempty"`
	// Responder is the URL asked, without user information, query or
	// fragment.
	Responder     string `json:"responder,omitempty"`
	FetchFailures uint64 `json:"fetch_failures"`
}

// revocationCheckView is one scope of revocation checking.
type revocationCheckView struct {
	Scope   string                 `json:"scope"`
	Checks  string                 `json:"checks"`
	Policy  string                 `json:"policy"`
	Sources []revocationSourceView `json:"sources"`
}

// revocationSourceView is one CRL source or OCSP responder.
type revocationSourceView struct {
	Kind       string     `json:"kind"`
	Source     string     `json:"source"`
	State      string     `json:"state"`
	ThisUpdate *time.Time `json:"this_update,omitempty"`
	NextUpdate *time.Time `json:"next_update,omitempty"`
	// Revoked counts the loaded CRL's entries.
	Revoked     *int       `json:"revoked,omitempty"`
	LastFetch   *time.Time `json:"last_fetch,omitempty"`
	LastSuccess *time.Time `json:"last_success,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// maxRevocationSources bounds the sources listed over all scopes.
const maxRevocationSources = 2000

// timeOrNil is t in UTC, nil for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (h *Handler) certificates(*http.Request) any {
	now := h.o.Now()
	served, cut := bounded(h.o.State.Certificates())
	out := make([]certificateView, 0, len(served))
	for _, c := range served {
		l := c.Leaf
		v := certificateView{
			Source: observe.SafeText(c.Source), Role: c.Role,
			Subject: observe.SafeText(l.Subject.String()), Issuer: observe.SafeText(l.Issuer.String()),
			Serial: hex.EncodeToString(l.SerialNumber.Bytes()), KeyType: keyType(l.PublicKey),
			KeyBackend: c.KeyBackend, NotBefore: l.NotBefore.UTC(), NotAfter: l.NotAfter.UTC(),
			DaysLeft:   int(l.NotAfter.Sub(now).Hours() / 24),
			Revocation: "not_checked",
			SANs:       []string{},
		}
		if st := c.Staple; st != nil {
			v.Revocation = st.State
			v.OCSPStaple = &stapleView{State: st.State, NextUpdate: timeOrNil(st.NextUpdate), Responder: observe.SafeText(st.Responder), FetchFailures: st.FetchFailures}
		}
		for _, n := range l.DNSNames {
			v.SANs = append(v.SANs, observe.SafeText(n))
		}
		for _, ip := range l.IPAddresses {
			v.SANs = append(v.SANs, ip.String())
		}
		v.SANs, _ = bounded(v.SANs)
		out = append(out, v)
	}
	scopes, scopesCut := bounded(h.o.State.Revocation())
	checks := make([]revocationCheckView, 0, len(scopes))
	listed := 0
	for _, sc := range scopes {
		cv := revocationCheckView{Scope: observe.SafeText(sc.Scope), Checks: sc.Checks, Policy: sc.Policy, Sources: []revocationSourceView{}}
		sources := sc.Sources
		if room := maxRevocationSources - listed; len(sources) > room {
			sources, scopesCut = sources[:max(room, 0)], true
		}
		listed += len(sources)
		for _, src := range sources {
			sv := revocationSourceView{
				Kind: src.Kind, Source: observe.SafeText(src.Source), State: src.State,
				ThisUpdate: timeOrNil(src.ThisUpdate), NextUpdate: timeOrNil(src.NextUpdate),
				LastFetch: timeOrNil(src.LastFetch), LastSuccess: timeOrNil(src.LastSuccess),
				LastError: observe.SafeText(src.LastError),
			}
			if src.Kind == "crl" && sv.ThisUpdate != nil {
				n := src.Revoked
				sv.Revoked = &n
			}
			cv.Sources = append(cv.Sources, sv)
		}
		checks = append(checks, cv)
	}
	return map[string]any{"certificates": out, "truncated": cut, "revocation_checks": checks, "revocation_checks_truncated": scopesCut}
}

func keyType(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == sm2.P256() {
			return "sm2"
		}
		return "ecdsa-" + k.Curve.Params().Name
	case *rsa.PublicKey:
		return "rsa-" + strconv.Itoa(k.N.BitLen())
	case ed25519.PublicKey:
		return "ed25519"
	}
	return "unknown"
}

type targetView struct {
	URL string `json:"url"`
	// State is in_service, down (failed its health checks), ejected
	// (failed on real traffic), or drained (by an operator).
	State        string     `json:"state"`
	Healthy      bool       `json:"healthy"`
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	Drained      bool       `json:"drained"`
	InFlight     int64      `json:"in_flight"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at,omitempty"`
}

type upstreamView struct {
	Name    string       `json:"name"`
	Scheme  string       `json:"scheme"`
	Policy  string       `json:"policy"`
	Targets []targetView `json:"targets"`
	// InService counts the targets that take requests.
	InService int `json:"in_service"`
	// Latency is of the responses' headers, from
	// gmgate_upstream_response_duration_seconds.
	Latency  Percentiles        `json:"latency"`
	Requests map[string]float64 `json:"requests_by_code"`
}

func (h *Handler) upstreams(*http.Request) any {
	fam := gather(h.o.Metrics.Registry)
	latency := map[string]Percentiles{}
	fam.each("gmgate_upstream_response_duration_seconds", func(m *dto.Metric) {
		latency[labelOf(m, "upstream")] = percentiles(m.GetHistogram())
	})
	codes := map[string]map[string]float64{}
	fam.each("gmgate_upstream_requests_total", func(m *dto.Metric) {
		u := labelOf(m, "upstream")
		if codes[u] == nil {
			codes[u] = map[string]float64{}
		}
		codes[u][labelOf(m, "code")] += value(m)
	})
	ups, cut := bounded(h.o.State.Upstreams())
	out := make([]upstreamView, 0, len(ups))
	for _, u := range ups {
		v := upstreamView{Name: u.Name, Scheme: u.Scheme, Policy: u.Policy, Latency: latency[u.Name], Requests: codes[u.Name], Targets: []targetView{}}
		if v.Requests == nil {
			v.Requests = map[string]float64{}
		}
		targets, _ := bounded(u.Targets)
		for _, t := range targets {
			tv := targetView{URL: t.URL, Healthy: t.Healthy, Drained: t.Drained, InFlight: t.InFlight, LastError: observe.SafeText(t.LastError)}
			switch {
			case t.Drained:
				tv.State = "drained"
			case !t.Healthy:
				tv.State = "down"
			case !t.EjectedUntil.IsZero():
				tv.State = "ejected"
			default:
				tv.State = "in_service"
				v.InService++
			}
			if !t.EjectedUntil.IsZero() {
				e := t.EjectedUntil.UTC()
				tv.EjectedUntil = &e
			}
			if !t.LastErrorAt.IsZero() {
				e := t.LastErrorAt.UTC()
				tv.LastErrorAt = &e
			}
			v.Targets = append(v.Targets, tv)
		}
		out = append(out, v)
	}
	return map[string]any{"upstreams": out, "truncated": cut}
}

func (h *Handler) sessions(*http.Request) any {
	fam := gather(h.o.Metrics.Registry)
	si := h.o.State.SessionCaches()
	si.Caches, _ = bounded(si.Caches)
	if si.Caches == nil {
		si.Caches = []SessionCacheInfo{}
	}
	// Resumption by protocol: the share of successful handshakes that
	// resumed a session, the caches' hit rate as clients see it.
	resumption := map[string]map[string]float64{}
	fam.each("gmgate_handshakes_resumed_total", func(m *dto.Metric) {
		p := labelOf(m, "protocol")
		ok := fam.sum("gmgate_handshakes_total", map[string]string{"protocol": p, "result": "ok"})
		r := value(m)
		rate := 0.0
		if ok > 0 {
			rate = r / ok
		}
		resumption[p] = map[string]float64{"handshakes": ok, "resumed": r, "hit_rate": rate}
	})
	out := map[string]any{"caches": si.Caches, "resumption": resumption}
	if si.Store != "" {
		store := map[string]any{"kind": si.Store}
		if mf := fam["gmgate_session_store_up"]; mf != nil && len(mf.GetMetric()) > 0 {
			store["up"] = value(mf.GetMetric()[0]) == 1
		}
		lookups := map[string]float64{}
		fam.each("gmgate_session_store_lookups_total", func(m *dto.Metric) { lookups[labelOf(m, "result")] += value(m) })
		store["lookups"] = lookups
		if asked := lookups["hit"] + lookups["miss"]; asked > 0 {
			store["hit_rate"] = lookups["hit"] / asked
		}
		out["store"] = store
	}
	return out
}

type accelBackend struct {
	Backend string `json:"backend"`
	// Ops are the key operations by operation and result.
	Ops map[string]map[string]float64 `json:"ops"`
	// Errors are the failed operations by kind.
	Errors       map[string]float64     `json:"errors"`
	PoolInUse    float64                `json:"pool_in_use"`
	Latency      map[string]Percentiles `json:"latency"`
	OpsPerSecond float64                `json:"ops_per_second"`
}

func (h *Handler) accel(*http.Request) any {
	fam := gather(h.o.Metrics.Registry)
	byName := map[string]*accelBackend{}
	backend := func(name string) *accelBackend {
		b := byName[name]
		if b == nil {
			b = &accelBackend{Backend: name, Ops: map[string]map[string]float64{}, Errors: map[string]float64{}, Latency: map[string]Percentiles{}}
			byName[name] = b
		}
		return b
	}
	fam.each("gmgate_accel_ops_total", func(m *dto.Metric) {
		b := backend(labelOf(m, "backend"))
		op, result := labelOf(m, "op"), labelOf(m, "result")
		if b.Ops[op] == nil {
			b.Ops[op] = map[string]float64{}
		}
		b.Ops[op][result] += value(m)
		if result != "ok" {
			b.Errors[result] += value(m)
		}
	})
	fam.each("gmgate_accel_pool_in_use", func(m *dto.Metric) { backend(labelOf(m, "backend")).PoolInUse = value(m) })
	fam.each("gmgate_accel_op_duration_seconds", func(m *dto.Metric) {
		backend(labelOf(m, "backend")).Latency[labelOf(m, "op")] = percentiles(m.GetHistogram())
	})
	for name, rate := range h.cost.accelRates() {
		backend(name).OpsPerSecond = rate
	}
	out := make([]*accelBackend, 0, len(byName))
	for _, b := range byName {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Backend < out[j].Backend })
	return map[string]any{"backends": out}
}

func (h *Handler) failures(*http.Request) any {
	recent, total := h.o.Metrics.Failures.Recent()
	if recent == nil {
		recent = []observe.HandshakeFailure{}
	}
	return map[string]any{"failures": recent, "kept": len(recent), "capacity": observe.RecentFailures, "total": total}
}

// reload is POST /api/v1/reload.
func (h *Handler) reload(w http.ResponseWriter, r *http.Request) (int, any) {
	if err := h.o.State.Reload(); err != nil {
		return http.StatusUnprocessableEntity, map[string]any{"result": "failure", "problems": problemLines(err)}
	}
	c := h.o.State.Config()
	return http.StatusOK, map[string]any{"result": "success", "generation": c.Generation}
}

// problemLines splits a reload error into its problems, one a line.
func problemLines(err error) []string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	lines, _ = bounded(lines)
	for i := range lines {
		lines[i] = observe.SafeText(lines[i])
	}
	return lines
}

func (h *Handler) drain(drained bool) func(http.ResponseWriter, *http.Request) (int, any) {
	return func(w http.ResponseWriter, r *http.Request) (int, any) {
		up, target := r.PathValue("upstream"), r.PathValue("target")
		changed, err := h.o.State.SetDrained(up, target, drained)
		if errors.Is(err, ErrNotFound) {
			return http.StatusNotFound, apiError{"no such upstream or target"}
		}
		if err != nil {
			return http.StatusInternalServerError, apiError{observe.SafeText(err.Error())}
		}
		return http.StatusOK, map[string]any{"upstream": up, "target": target, "drained": drained, "changed": changed}
	}
}

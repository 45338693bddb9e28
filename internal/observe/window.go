package observe

import (
	"sort"
	"sync"
	"time"
)

// The migration view counts connections and requests per site, protocol
// and cipher suite over the last minutes: Prometheus counters answer
// "since the process started", the admin console asks "lately".

// windowMinutes is how far back the window reaches, in slots of
// slotSeconds: "the last minute" is the last 50 to 60 seconds.
const (
	windowMinutes = 60
	slotSeconds   = 10
	windowSlots   = windowMinutes * 60 / slotSeconds
)

// maxWindowSeries bounds the series a window keeps (site × protocol ×
// suite, all from the configuration and the suite tables, but a bound
// all the same); counts past it go to the overflow series.
const maxWindowSeries = 512

// WindowKey names one series of the window.
type WindowKey struct {
	Site, Protocol, Suite string
}

// overflowKey takes the counts of series past maxWindowSeries.
var overflowKey = WindowKey{Site: "(other)", Protocol: "(other)", Suite: "(other)"}

// slotBucket is one slot of one series.
type slotBucket struct {
	slot            int64 // Unix time / slotSeconds of the counts
	conns, requests uint64
	offeredGM       uint64
}

type windowSeries struct {
	mu      sync.Mutex
	buckets [windowSlots]slotBucket
}

func (s *windowSeries) add(slot int64, conns, requests, offeredGM uint64) {
	b := &s.buckets[slot%windowSlots]
	s.mu.Lock()
	if b.slot != slot {
		*b = slotBucket{slot: slot}
	}
	b.conns += conns
	b.requests += requests
	b.offeredGM += offeredGM
	s.mu.Unlock()
}

// sum adds the buckets of the last minutes minutes, up to now's slot.
func (s *windowSeries) sum(now int64, minutes int) (conns, requests, offeredGM uint64) {
	from := now - int64(minutes*60/slotSeconds)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.buckets {
		b := &s.buckets[i]
		if b.slot > from && b.slot <= now {
			conns += b.conns
			requests += b.requests
			offeredGM += b.offeredGM
		}
	}
	return
}

// Window counts connections, requests and TLS clients that offered GM
// suites by site, protocol and suite, ten seconds at a time, over the last
// hour. Safe for concurrent use; the zero value is not: use NewWindow.
type Window struct {
	// series is read under mu's read lock: a plain map, so that a lookup
	// by a key of three strings allocates nothing (a sync.Map would box
	// the key on every request).
	mu     sync.RWMutex
	series map[WindowKey]*windowSeries
	// now is time.Now, replaced in tests.
	now func() time.Time
}

func NewWindow() *Window { return &Window{now: time.Now, series: map[WindowKey]*windowSeries{}} }

func (w *Window) seriesOf(k WindowKey) *windowSeries {
	w.mu.RLock()
	s := w.series[k]
	w.mu.RUnlock()
	if s != nil {
		return s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.series[k]; s != nil {
		return s
	}
	if len(w.series) >= maxWindowSeries {
		k = overflowKey
		if s := w.series[k]; s != nil {
			return s
		}
	}
	s = &windowSeries{}
	w.series[k] = s
	return s
}

func (w *Window) slot() int64 { return w.now().Unix() / slotSeconds }

// Connection counts an established client connection.
func (w *Window) Connection(site, protocol, suite string) {
	w.seriesOf(WindowKey{site, protocol, suite}).add(w.slot(), 1, 0, 0)
}

// Request counts a request served on a connection of site, protocol and
// suite.
func (w *Window) Request(site, protocol, suite string) {
	w.seriesOf(WindowKey{site, protocol, suite}).add(w.slot(), 0, 1, 0)
}

// OfferedGM counts a TLS client whose ClientHello offered a GM cipher
// suite (TLCP's) on site: the clients that could move to GM. Fed by
// Metrics.GMCapableHello.
func (w *Window) OfferedGM(site string) {
	w.seriesOf(WindowKey{Site: site}).add(w.slot(), 0, 0, 1)
}

// WindowCount is one series' counts over some minutes.
type WindowCount struct {
	WindowKey
	Connections, Requests, OfferedGM uint64
}

// Counts returns every series with a count over the last minutes
// minutes (1 to 60), sorted by site, protocol and suite.
func (w *Window) Counts(minutes int) []WindowCount {
	minutes = max(1, min(minutes, windowMinutes))
	now := w.slot()
	var out []WindowCount
	w.mu.RLock()
	for k, s := range w.series {
		c, r, g := s.sum(now, minutes)
		if c+r+g > 0 {
			out = append(out, WindowCount{WindowKey: k, Connections: c, Requests: r, OfferedGM: g})
		}
	}
	w.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].WindowKey, out[j].WindowKey
		if a.Site != b.Site {
			return a.Site < b.Site
		}
		if a.Protocol != b.Protocol {
			return a.Protocol < b.Protocol
		}
		return a.Suite < b.Suite
	})
	return out
}

// RecentFailures is how many failed handshakes Metrics.Failures keeps.
const RecentFailures = 100

// Request counts a served request in the migration window.
func (m *Metrics) Request(site, protocol, suite string) { m.Window.Request(site, protocol, suite) }

// OfferedGM counts a TLS client of site whose ClientHello offered a GM
// cipher suite, for the migration view.
func (m *Metrics) OfferedGM(site string) { m.Window.OfferedGM(site) }

package admin

import (
	"net/http"
	"strings"

	"github.com/gmgate/gmgate/internal/observe"
)

// migrationWindows are the minutes the migration view sums over.
var migrationWindows = []int{1, 15, 60}

// IsGM reports whether a connection of protocol and suite is a GM one:
// TLCP, TLS 1.3 with the ShangMi suites (RFC 8998), or any suite with
// SM4.
func IsGM(protocol, suite string) bool {
	return protocol == "tlcp" || protocol == "tls1.3-sm" || strings.Contains(suite, "SM4")
}

type suiteCount struct {
	Protocol    string `json:"protocol"`
	Suite       string `json:"suite"`
	GM          bool   `json:"gm"`
	Connections uint64 `json:"connections"`
	Requests    uint64 `json:"requests"`
}

type windowView struct {
	Minutes       int    `json:"minutes"`
	Connections   uint64 `json:"connections"`
	Requests      uint64 `json:"requests"`
	GMConnections uint64 `json:"gm_connections"`
	GMRequests    uint64 `json:"gm_requests"`
	// GMShare and GMRequestShare are the GM part of the connections and
	// requests, from 0 to 1 (0 without traffic).
	GMShare        float64 `json:"gm_share"`
	GMRequestShare float64 `json:"gm_request_share"`
	// TLSClientsOfferedGM counts TLS clients whose ClientHello offered a
	// GM suite: those that could be served GM.
	TLSClientsOfferedGM uint64       `json:"tls_clients_offered_gm"`
	BySuite             []suiteCount `json:"by_suite"`
}

type siteMigration struct {
	Site    string       `json:"site"`
	Windows []windowView `json:"windows"`
}

func (h *Handler) migration(*http.Request) any {
	bySite := map[string]*siteMigration{}
	var order []string
	// Every configured site shows, traffic or not.
	for _, l := range h.o.State.Listeners() {
		for _, s := range l.Sites {
			if bySite[s.Name] == nil && len(order) < maxItems {
				bySite[s.Name] = &siteMigration{Site: s.Name}
				order = append(order, s.Name)
			}
		}
	}
	for i, minutes := range migrationWindows {
		for _, c := range h.o.Metrics.Window.Counts(minutes) {
			site := observe.SafeText(c.Site)
			sm := bySite[site]
			if sm == nil {
				if len(order) >= maxItems {
					continue
				}
				sm = &siteMigration{Site: site}
				bySite[site] = sm
				order = append(order, site)
			}
			for len(sm.Windows) <= i {
				sm.Windows = append(sm.Windows, windowView{Minutes: migrationWindows[len(sm.Windows)], BySuite: []suiteCount{}})
			}
			w := &sm.Windows[i]
			w.TLSClientsOfferedGM += c.OfferedGM
			if c.Connections+c.Requests == 0 {
				continue // a series of OfferedGM only
			}
			gm := IsGM(c.Protocol, c.Suite)
			w.Connections += c.Connections
			w.Requests += c.Requests
			if gm {
				w.GMConnections += c.Connections
				w.GMRequests += c.Requests
			}
			if len(w.BySuite) < maxItems {
				w.BySuite = append(w.BySuite, suiteCount{Protocol: observe.SafeText(c.Protocol), Suite: observe.SafeText(c.Suite), GM: gm, Connections: c.Connections, Requests: c.Requests})
			}
		}
	}
	out := make([]siteMigration, 0, len(order))
	for _, name := range order {
		sm := bySite[name]
		for len(sm.Windows) < len(migrationWindows) {
			sm.Windows = append(sm.Windows, windowView{Minutes: migrationWindows[len(sm.Windows)], BySuite: []suiteCount{}})
		}
		for i := range sm.Windows {
			w := &sm.Windows[i]
			if w.Connections > 0 {
				w.GMShare = float64(w.GMConnections) / float64(w.Connections)
			}
			if w.Requests > 0 {
				w.GMRequestShare = float64(w.GMRequests) / float64(w.Requests)
			}
		}
		out = append(out, *sm)
	}
	return map[string]any{"windows_minutes": migrationWindows, "sites": out}
}

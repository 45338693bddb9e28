package upstream

import (
	"log/slog"
	"sync"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/tlcphint"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
)

// targetProfiles is the client profile of each target of a tlcp://
// upstream: the configured one, or with profile auto the one the
// target's last handshake took. An auto target starts with standard
// (what Tongsuo, gotlcp, Kona and gmgate take) and moves to gmssl when
// it refuses the standard profile's answer to its CertificateRequest and
// takes the gmssl one (a GmSSL 3 server); a remembered profile holds
// until a handshake under it fails, when the other is tried again.
type targetProfiles struct {
	auto bool
	// fixed is the configured profile (standard or gmssl) when not auto.
	fixed string
	log   *slog.Logger
	gauge *prometheus.GaugeVec
	pool  string

	mu sync.Mutex
	// known is the profile each auto target's last handshake took
	// (absent: none yet, or every profile was refused since).
	known map[string]string
}

var profileNames = []string{tlcp.ProfileStandard, tlcp.ProfileGmSSL}

func newTargetProfiles(p *Pool, configured string, targets []*Target) *targetProfiles {
	tp := &targetProfiles{log: p.log, gauge: p.metrics.UpstreamTLCPProfile, pool: p.Name, known: map[string]string{}}
	if configured == config.UpstreamProfileAuto {
		tp.auto = true
	} else {
		tp.fixed = configured
		if tp.fixed == "" {
			tp.fixed = tlcp.ProfileStandard
		}
	}
	for _, t := range targets {
		// A pool built anew (a reload) learns again; its series start
		// from what it knows.
		for _, name := range profileNames {
			v := 0.0
			if name == tp.fixed {
				v = 1
			}
			tp.gauge.WithLabelValues(tp.pool, t.Addr, name).Set(v)
		}
	}
	return tp
}

// first is the profile to try first with the target at addr.
func (tp *targetProfiles) first(addr string) string {
	if !tp.auto {
		return tp.fixed
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if p, ok := tp.known[addr]; ok {
		return p
	}
	return tlcp.ProfileStandard
}

// retry reports which profile to try after a handshake under tried
// failed with err, having seen facts; "" for none.
func (tp *targetProfiles) retry(tried string, err error, facts tlcphint.Facts) string {
	if !tp.auto || !tlcphint.ProfileRefused(err, facts) {
		return ""
	}
	if tried == tlcp.ProfileGmSSL {
		return tlcp.ProfileStandard
	}
	return tlcp.ProfileGmSSL
}

// took notes that the target at addr completed a handshake under
// profile, and says so when that is news.
func (tp *targetProfiles) took(addr, profile string) {
	if !tp.auto {
		return
	}
	tp.mu.Lock()
	before, ok := tp.known[addr]
	tp.known[addr] = profile
	tp.mu.Unlock()
	if ok && before == profile {
		return
	}
	tp.setGauge(addr, profile)
	tp.log.Info("upstream target takes TLCP client profile "+profile, "target", addr, "profile", profile)
}

// refused forgets what the target at addr took: every profile tried was
// refused.
func (tp *targetProfiles) refused(addr string) {
	if !tp.auto {
		return
	}
	tp.mu.Lock()
	_, ok := tp.known[addr]
	delete(tp.known, addr)
	tp.mu.Unlock()
	if ok {
		tp.setGauge(addr, "")
	}
}

func (tp *targetProfiles) setGauge(addr, profile string) {
	for _, name := range profileNames {
		v := 0.0
		if name == profile {
			v = 1
		}
		tp.gauge.WithLabelValues(tp.pool, addr, name).Set(v)
	}
}

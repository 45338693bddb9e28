package upstream

// Health of upstream targets, apart from selection and transport: active
// checks on a timer (HTTP GET of a path, or a TCP connect) and passive
// failure counting on real traffic with ejection for a while, which a
// passed active check ends.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// start runs the active health checks until close.
func (p *Pool) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.stopped = make(chan struct{})
	if p.Cfg.Health.Disabled {
		close(p.stopped)
		return
	}
	go func() {
		defer close(p.stopped)
		interval := p.Cfg.Health.Interval.D()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			p.checkAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (p *Pool) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range p.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.check(ctx, t)
			if ctx.Err() != nil {
				return
			}
			p.record(t, err)
		}()
	}
	wg.Wait()
	p.updateHealthyGauge()
}

// record applies one check result; each target is checked by one
// goroutine at a time, so the counters need no lock.
func (p *Pool) record(t *Target, err error) {
	if err != nil {
		t.noteError(err)
		t.checkPasses = 0
		t.checkFails++
		if t.checkFails >= p.Cfg.Health.Fails && t.healthy.Load() {
			t.healthy.Store(false)
			attrs := []any{"target", t.Addr, "cause", err.Error()}
			if hint := FailureHint(err); hint != "" {
				attrs = append(attrs, "hint", hint)
			}
			p.log.Warn("upstream target down", attrs...)
		}
		return
	}
	t.checkFails = 0
	t.checkPasses++
	if t.checkPasses >= p.Cfg.Health.Passes && !t.healthy.Load() {
		t.healthy.Store(true)
		t.fails.Store(0)
		t.ejectedUntil.Store(0)
		p.log.Info("upstream target up", "target", t.Addr)
		return
	}
	// A passed check ends a passive ejection early, as Envoy does: the
	// failures that caused it may be long over.
	if t.ejectedUntil.Load() > time.Now().UnixNano() {
		t.fails.Store(0)
		t.ejectedUntil.Store(0)
		p.log.Info("upstream target back in service: a health check passed", "target", t.Addr)
	}
}

func (p *Pool) check(ctx context.Context, t *Target) error {
	ctx, cancel := context.WithTimeout(ctx, p.Cfg.Health.Timeout.D())
	defer cancel()
	if p.Cfg.Health.Path == "" || p.Scheme == "tcp" {
		return p.Transport.probe(ctx, t)
	}
	u := *t.url
	u.Path = p.Cfg.Health.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "gmgate-health-check")
	if t.host != "" {
		req.Host = t.host
	}
	resp, err := p.Transport.roundTrip(req, t, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("health check %s answered %s", p.Cfg.Health.Path, resp.Status)
	}
	return nil
}

func (p *Pool) updateHealthyGauge() {
	n := 0
	now := time.Now()
	for _, t := range p.Targets {
		if t.Available(now) {
			n++
		}
	}
	p.metrics.UpstreamHealthy.WithLabelValues(p.Name).Set(float64(n))
}

// failed counts a failure on real traffic against t and ejects it after
// maxFails in a row.
func (p *Pool) failed(t *Target, err error) {
	t.noteError(err)
	if p.maxFails <= 0 {
		return
	}
	if n := t.fails.Add(1); int(n) >= p.maxFails {
		until := time.Now().Add(p.Cfg.Passive.EjectFor.D())
		if t.ejectedUntil.Swap(until.UnixNano()) < time.Now().UnixNano() {
			p.log.Warn("upstream target ejected", "target", t.Addr, "failures", n, "for", p.Cfg.Passive.EjectFor.String(), "cause", err.Error())
		}
		t.fails.Store(0)
		p.updateHealthyGauge()
	}
}

func (p *Pool) succeeded(t *Target) {
	if t.fails.Load() != 0 {
		t.fails.Store(0)
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IdleSchema names the layout of IdleReport in JSON.
const IdleSchema = "gmgate.bench.idle-conns/v1"

// IdleOptions says what RunIdleConns does.
type IdleOptions struct {
	GatewayOptions
	// Protocol is the gateway listener: tlcp-gcm (default), tlcp-cbc or
	// tls.
	Protocol string
	// Conns is the number of connections held open (DefaultIdleConns
	// when zero).
	Conns int
	// Settle is how long the connections stay idle before the gateway's
	// memory is read (none when zero).
	Settle time.Duration
}

// Defaults of gmgate bench idle-conns.
const (
	DefaultIdleConns = 5000
	DefaultSettle    = 3 * time.Second
)

// IdleReport is the outcome of RunIdleConns.
type IdleReport struct {
	GatewayReportHead
	Protocol      string       `json:"protocol"`
	Conns         int          `json:"conns"`
	SettleSeconds float64      `json:"settle_seconds"`
	Results       []IdleResult `json:"results"`
}

// IdleResult is one build over all rounds.
type IdleResult struct {
	Build string `json:"build"`
	// KiBPerConn is the growth of the gateway's resident memory per idle
	// connection, in KiB.
	KiBPerConn Summary `json:"kib_per_conn"`
	// RSSBeforeMiB and RSSAfterMiB are the gateway's resident memory
	// before the connections and with them.
	RSSBeforeMiB Summary     `json:"rss_before_mib"`
	RSSAfterMiB  Summary     `json:"rss_after_mib"`
	Rounds       []IdleRound `json:"rounds"`
}

// IdleRound is one gateway process's measurement.
type IdleRound struct {
	RSSBefore int64 `json:"rss_before"`
	RSSAfter  int64 `json:"rss_after"`
}

func (r IdleRound) perConn(n int) float64 { return float64(r.RSSAfter-r.RSSBefore) / float64(n) / 1024 }

func (o *IdleOptions) defaults() error {
	if o.Protocol == "" {
		o.Protocol = "tlcp-gcm"
	}
	if err := checkProtocols([]string{o.Protocol}); err != nil {
		return err
	}
	if o.Conns < 0 || o.Settle < 0 || o.Rounds < 0 {
		return errors.New("connections, settling time and rounds cannot be negative")
	}
	if o.Conns == 0 {
		o.Conns = DefaultIdleConns
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	return nil
}

// idleWarmup is how many connections make one request each, and close,
// before the gateway's memory is first read: what a gateway sets up on
// its first connections (upstream pools, buffers) is not counted per
// connection.
const idleWarmup = 64

// RunIdleConns measures the memory an idle keep-alive connection costs a
// gateway: for each build in every round, a new gateway process; its
// resident memory (VmRSS) after a warm-up, then with Conns connections
// open, each after one request, idle for Settle.
func RunIdleConns(ctx context.Context, opts IdleOptions) (*IdleReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	env, head, err := startRun(ctx, &opts.GatewayOptions, IdleSchema, 1024)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &IdleReport{GatewayReportHead: head, Conns: opts.Conns, SettleSeconds: opts.Settle.Seconds()}
	rounds := map[string][]IdleRound{}
	for r := 0; r < opts.Rounds; r++ {
		for _, b := range buildOrder(opts.Builds, r) {
			res, protocol, err := env.idleRound(ctx, b, opts)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.Name, err)
			}
			rep.Protocol = protocol
			rounds[b.Name] = append(rounds[b.Name], res)
			opts.progress("round %d/%d, %s: %.1f MiB before, %.1f MiB with %d idle connections: %.1f KiB per connection",
				r+1, opts.Rounds, b.Name, float64(res.RSSBefore)/(1<<20), float64(res.RSSAfter)/(1<<20), opts.Conns, res.perConn(opts.Conns))
		}
	}
	for _, b := range opts.Builds {
		rs := rounds[b.Name]
		var per, before, after []float64
		for _, x := range rs {
			per = append(per, x.perConn(opts.Conns))
			before = append(before, float64(x.RSSBefore)/(1<<20))
			after = append(after, float64(x.RSSAfter)/(1<<20))
		}
		rep.Results = append(rep.Results, IdleResult{
			Build: b.Name, KiBPerConn: summarizeRounds(per),
			RSSBeforeMiB: summarizeRounds(before), RSSAfterMiB: summarizeRounds(after), Rounds: rs,
		})
	}
	rep.end()
	return rep, nil
}

// idleRound starts a gateway of b and measures it once.
func (e *gatewayEnv) idleRound(ctx context.Context, b GatewayBuild, opts IdleOptions) (IdleRound, string, error) {
	g, err := e.startGateway(ctx, b, opts.Conns+idleWarmup+100)
	if err != nil {
		return IdleRound{}, "", err
	}
	defer g.stop()
	d, err := g.dialer(opts.Protocol)
	if err != nil {
		return IdleRound{}, "", err
	}
	// Each client sends its request as soon as it is connected, as
	// clients do.
	oneRequestEach := func(n int) ([]*keepAliveClient, error) {
		return dialClients(ctx, d, n, "/", 4096, (*keepAliveClient).do)
	}
	warm, err := oneRequestEach(idleWarmup)
	if err != nil {
		return IdleRound{}, "", err
	}
	closeClients(warm)
	if !sleepCtx(ctx, opts.Settle) {
		return IdleRound{}, "", ctx.Err()
	}
	var res IdleRound
	if res.RSSBefore, err = g.rss(); err != nil {
		return IdleRound{}, "", err
	}
	cs, err := oneRequestEach(opts.Conns)
	if err != nil {
		return IdleRound{}, "", err
	}
	defer closeClients(cs)
	if !sleepCtx(ctx, opts.Settle) {
		return IdleRound{}, "", ctx.Err()
	}
	if res.RSSAfter, err = g.rss(); err != nil {
		return IdleRound{}, "", err
	}
	return res, d.protocol, nil
}

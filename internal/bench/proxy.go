package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ProxySchema names the layout of ProxyReport in JSON.
const ProxySchema = "gmgate.bench.proxy/v1"

// Defaults of gmgate bench proxy.
const (
	DefaultProxyDuration = 5 * time.Second
	DefaultProxyWarmup   = time.Second
	DefaultBody          = 1024
	// MaxClients bounds a number of keep-alive clients.
	MaxClients = 10000
)

// DefaultClients are the numbers of keep-alive clients of gmgate bench
// proxy.
var DefaultClients = []int{8, 64}

// ProxyOptions says what RunProxy does.
type ProxyOptions struct {
	GatewayOptions
	// Protocols are the gateway listeners to load: tlcp-gcm, tlcp-cbc,
	// tls (default all three).
	Protocols []string
	// Clients are the numbers of keep-alive clients to run with
	// (DefaultClients when empty), each on one connection.
	Clients []int
	// Duration of each measurement (DefaultProxyDuration when zero),
	// after Warmup (none when zero) whose requests are not counted.
	Duration, Warmup time.Duration
	// Body is the size of the upstream's responses (DefaultBody when
	// zero).
	Body int
	// ServerProfile, when set, is a directory that receives a CPU profile
	// of the first build's gateway for every measurement of it
	// (PROTOCOL-cCLIENTS-rROUND.cpu.pprof), taken from its admin
	// listener's /debug/pprof/profile over the measured window.
	ServerProfile string
}

// ProxyReport is the outcome of RunProxy.
type ProxyReport struct {
	GatewayReportHead
	Body            int               `json:"body"`
	DurationSeconds float64           `json:"duration_seconds"`
	WarmupSeconds   float64           `json:"warmup_seconds"`
	Results         []ProxyResult     `json:"results"`
	Comparisons     []ProxyComparison `json:"comparisons,omitempty"`
}

// ProxyResult is one build, protocol and number of clients over all
// rounds. Build "direct" is the load sent straight to the upstream.
type ProxyResult struct {
	Build             string  `json:"build"`
	Protocol          string  `json:"protocol"`
	Clients           int     `json:"clients"`
	RequestsPerSecond Summary `json:"requests_per_second"`
	// ServerCPUPer1000 is the gateway's CPU time per 1000 requests, ms.
	ServerCPUPer1000 Summary `json:"server_cpu_ms_per_1000_requests"`
	ServerBusy       Summary `json:"server_busy"`
	LoadBusy         Summary `json:"load_busy"`
	P50Ms            Summary `json:"p50_ms"`
	P99Ms            Summary `json:"p99_ms"`
	// AddedP50Ms and AddedP99Ms are the latency over going direct with
	// the same clients in the same round.
	AddedP50Ms Summary      `json:"added_p50_ms"`
	AddedP99Ms Summary      `json:"added_p99_ms"`
	Errors     int64        `json:"errors"`
	Rounds     []ProxyRound `json:"rounds"`
}

// ProxyRound is one measurement.
type ProxyRound struct {
	Requests         int64   `json:"requests"`
	Seconds          float64 `json:"seconds"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	LoadCPUSeconds   float64 `json:"load_cpu_seconds"`
	P50Ms            float64 `json:"p50_ms"`
	P99Ms            float64 `json:"p99_ms"`
	AddedP50Ms       float64 `json:"added_p50_ms"`
	AddedP99Ms       float64 `json:"added_p99_ms"`
	Errors           int64   `json:"errors"`
	FirstError       string  `json:"first_error,omitempty"`
}

func (r ProxyRound) perSecond() float64 { return float64(r.Requests) / r.Seconds }

// ProxyComparison is the first build against another, per protocol and
// clients: the ratio of each round's figures, as median and spread.
type ProxyComparison struct {
	Build    string `json:"build"`
	Against  string `json:"against"`
	Protocol string `json:"protocol"`
	Clients  int    `json:"clients"`
	// ServerCPU is this build's CPU per request over the other's.
	ServerCPU Summary `json:"server_cpu_ratio"`
	// RequestsPerSecond is this build's rate over the other's.
	RequestsPerSecond Summary `json:"requests_per_second_ratio"`
	// AddedP99Ms is this build's added p99 minus the other's.
	AddedP99Ms Summary `json:"added_p99_ms_difference"`
}

func (o *ProxyOptions) defaults() error {
	if len(o.Protocols) == 0 {
		o.Protocols = gatewayProtocols
	}
	if err := checkProtocols(o.Protocols); err != nil {
		return err
	}
	if len(o.Clients) == 0 {
		o.Clients = DefaultClients
	}
	for _, c := range o.Clients {
		if c <= 0 || c > MaxClients {
			return fmt.Errorf("clients must be between 1 and %d, not %d", MaxClients, c)
		}
	}
	if o.Duration < 0 || o.Warmup < 0 {
		return errors.New("durations cannot be negative")
	}
	if o.Duration == 0 {
		o.Duration = DefaultProxyDuration
	}
	if o.Body < 0 {
		return fmt.Errorf("a body of %d bytes", o.Body)
	}
	if o.Body == 0 {
		o.Body = DefaultBody
	}
	return nil
}

// RunProxy measures keep-alive HTTP requests through gateways: each build
// of gmgate serves TLCP (GCM and CBC) and TLS in front of the same
// upstream, and every round loads each protocol of each build with each
// number of clients in turn, and the upstream directly for the latency a
// gateway adds.
func RunProxy(ctx context.Context, opts ProxyOptions) (*ProxyReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if opts.ServerProfile != "" {
		if err := os.MkdirAll(opts.ServerProfile, 0o755); err != nil {
			return nil, err
		}
		opts.pprof = true
	}
	env, head, err := startRun(ctx, &opts.GatewayOptions, ProxySchema, opts.Body)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &ProxyReport{
		GatewayReportHead: head,
		Body:              opts.Body,
		DurationSeconds:   opts.Duration.Seconds(),
		WarmupSeconds:     opts.Warmup.Seconds(),
	}
	gateways, err := env.startGateways(ctx, 10000)
	defer gateways.stop()
	if err != nil {
		return nil, err
	}

	type key struct {
		build, protocol string
		clients         int
	}
	rounds := map[key][]ProxyRound{}
	protocolName := map[string]string{}
	for r := 0; r < opts.Rounds; r++ {
		for _, clients := range opts.Clients {
			direct, err := runKeepAlive(ctx, env.upstream.directDialer(), nil, clients, opts.Warmup, opts.Duration, "")
			if err != nil {
				return nil, fmt.Errorf("direct to the upstream: %w", err)
			}
			rounds[key{"direct", "direct", clients}] = append(rounds[key{"direct", "direct", clients}], direct)
			opts.progress("round %d/%d, %d clients, direct: %.0f requests/s, p50 %s ms, p99 %s ms",
				r+1, opts.Rounds, clients, direct.perSecond(), num(direct.P50Ms), num(direct.P99Ms))
			for _, proto := range opts.Protocols {
				for _, b := range buildOrder(opts.Builds, r) {
					d, err := gateways[b.Name].dialer(proto)
					if err != nil {
						return nil, err
					}
					protocolName[proto] = d.protocol
					profile := ""
					if opts.ServerProfile != "" && b.Name == opts.Builds[0].Name {
						profile = filepath.Join(opts.ServerProfile, fmt.Sprintf("%s-c%d-r%d.cpu.pprof", proto, clients, r+1))
					}
					res, err := runKeepAlive(ctx, d, gateways[b.Name], clients, opts.Warmup, opts.Duration, profile)
					if err != nil {
						return nil, fmt.Errorf("%s, %s: %w", b.Name, d.protocol, err)
					}
					res.AddedP50Ms = res.P50Ms - direct.P50Ms
					res.AddedP99Ms = res.P99Ms - direct.P99Ms
					k := key{b.Name, proto, clients}
					rounds[k] = append(rounds[k], res)
					opts.progress("round %d/%d, %d clients, %s, %s: %.0f requests/s, %s ms server CPU per 1000, p50 %s ms, p99 %s ms, %d errors",
						r+1, opts.Rounds, clients, d.protocol, b.Name, res.perSecond(), num(1e6*cpuPerRequest(res)),
						num(res.P50Ms), num(res.P99Ms), res.Errors)
				}
			}
		}
	}

	loadCores := float64(max(len(env.loadCPUs), 1))
	serverCores := float64(opts.ServerCores)
	for _, clients := range opts.Clients {
		rep.Results = append(rep.Results, proxyResult("direct", "direct", clients, rounds[key{"direct", "direct", clients}], 0, loadCores))
		for _, proto := range opts.Protocols {
			for _, b := range opts.Builds {
				rep.Results = append(rep.Results, proxyResult(b.Name, protocolName[proto], clients, rounds[key{b.Name, proto, clients}], serverCores, loadCores))
			}
			for _, other := range opts.Builds[1:] {
				mine, theirs := rounds[key{opts.Builds[0].Name, proto, clients}], rounds[key{other.Name, proto, clients}]
				var cpu, rate, p99 []float64
				for i := range min(len(mine), len(theirs)) {
					cpu = append(cpu, cpuPerRequest(mine[i])/cpuPerRequest(theirs[i]))
					rate = append(rate, mine[i].perSecond()/theirs[i].perSecond())
					p99 = append(p99, mine[i].AddedP99Ms-theirs[i].AddedP99Ms)
				}
				rep.Comparisons = append(rep.Comparisons, ProxyComparison{
					Build: opts.Builds[0].Name, Against: other.Name, Protocol: protocolName[proto], Clients: clients,
					ServerCPU: summarizeRounds(cpu), RequestsPerSecond: summarizeRounds(rate), AddedP99Ms: summarizeRounds(p99),
				})
			}
		}
	}
	rep.end()
	return rep, nil
}

func (o *GatewayOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

func cpuPerRequest(r ProxyRound) float64 { return r.ServerCPUSeconds / float64(max(r.Requests, 1)) }

func proxyResult(build, protocol string, clients int, rs []ProxyRound, serverCores, loadCores float64) ProxyResult {
	res := ProxyResult{Build: build, Protocol: protocol, Clients: clients, Rounds: rs}
	var rate, cpu, busy, load, p50, p99, a50, a99 []float64
	for _, r := range rs {
		rate = append(rate, r.perSecond())
		if serverCores > 0 {
			cpu = append(cpu, 1e6*cpuPerRequest(r))
			busy = append(busy, r.ServerCPUSeconds/r.Seconds/serverCores)
			a50 = append(a50, r.AddedP50Ms)
			a99 = append(a99, r.AddedP99Ms)
		}
		load = append(load, r.LoadCPUSeconds/r.Seconds/loadCores)
		p50 = append(p50, r.P50Ms)
		p99 = append(p99, r.P99Ms)
		res.Errors += r.Errors
	}
	res.RequestsPerSecond = summarizeRounds(rate)
	res.ServerCPUPer1000 = summarizeRounds(cpu)
	res.ServerBusy = summarizeRounds(busy)
	res.LoadBusy = summarizeRounds(load)
	res.P50Ms = summarizeRounds(p50)
	res.P99Ms = summarizeRounds(p99)
	res.AddedP50Ms = summarizeRounds(a50)
	res.AddedP99Ms = summarizeRounds(a99)
	return res
}

// keepAliveClient sends GET requests one after the other on one
// connection.
type keepAliveClient struct {
	conn    net.Conn
	br      *bufio.Reader
	request []byte
}

func (c *keepAliveClient) do() error {
	if _, err := c.conn.Write(c.request); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// dialClients connects n clients, 16 at a time, each reading through a
// buffer of bufSize bytes; then, when set, runs on each as soon as it is
// connected.
func dialClients(ctx context.Context, d gatewayDialer, n int, path string, bufSize int, then func(*keepAliveClient) error) ([]*keepAliveClient, error) {
	clients := make([]*keepAliveClient, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := d.dial(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = &keepAliveClient{
				conn:    c,
				br:      bufio.NewReaderSize(c, bufSize),
				request: []byte("GET " + path + " HTTP/1.1\r\nHost: bench.test\r\nUser-Agent: gmgate-bench\r\n\r\n"),
			}
			if then != nil {
				errs[i] = then(clients[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeClients(clients)
			return nil, fmt.Errorf("client %d of %d: %w", i+1, n, err)
		}
	}
	return clients, nil
}

func closeClients(cs []*keepAliveClient) {
	for _, c := range cs {
		if c != nil {
			c.conn.Close()
		}
	}
}

// runKeepAlive runs clients that each send requests back to back on their
// own connection for warmup+d and measures the window after the warm-up:
// requests completed in it, their latency, and the gateway's CPU time
// (g is nil when the load goes straight to the upstream). With profile
// set, a CPU profile of the gateway over the window is written there.
func runKeepAlive(ctx context.Context, d gatewayDialer, g *gatewayProcess, n int, warmup, dur time.Duration, profile string) (ProxyRound, error) {
	clients, err := dialClients(ctx, d, n, "/", 16<<10, nil)
	if err != nil {
		return ProxyRound{}, err
	}
	defer closeClients(clients)

	type sample struct {
		end time.Time
		d   time.Duration
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		samples  = make([][]sample, n)
		errCount atomic.Int64
		firstErr atomic.Value
	)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := make([]sample, 0, 4096)
			for !stop.Load() {
				start := time.Now()
				if err := c.do(); err != nil {
					if !stop.Load() {
						errCount.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					break
				}
				end := time.Now()
				s = append(s, sample{end, end.Sub(start)})
			}
			samples[i] = s
		}()
	}
	finish := func() {
		stop.Store(true)
		wg.Wait()
	}
	if !sleepCtx(ctx, warmup) {
		finish()
		return ProxyRound{}, ctx.Err()
	}
	var cpu0, cpu1 time.Duration
	if g != nil {
		if cpu0, err = g.cpu(); err != nil {
			finish()
			return ProxyRound{}, err
		}
	}
	var profiled chan error
	if profile != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- g.cpuProfile(ctx, dur, profile) }()
	}
	load0 := loadCPU()
	t0 := time.Now()
	ok := sleepCtx(ctx, dur)
	t1 := time.Now()
	load1 := loadCPU()
	if g != nil {
		cpu1, err = g.cpu()
	}
	finish()
	if profiled != nil {
		if perr := <-profiled; perr != nil && err == nil {
			err = perr
		}
	}
	if !ok {
		return ProxyRound{}, ctx.Err()
	}
	if err != nil {
		return ProxyRound{}, err
	}
	var lat []time.Duration
	for _, s := range samples {
		for _, x := range s {
			if !x.end.Before(t0) && x.end.Before(t1) {
				lat = append(lat, x.d)
			}
		}
	}
	st := summarize(lat)
	r := ProxyRound{
		Requests:         st.Count,
		Seconds:          t1.Sub(t0).Seconds(),
		ServerCPUSeconds: (cpu1 - cpu0).Seconds(),
		LoadCPUSeconds:   (load1 - load0).Seconds(),
		P50Ms:            st.P50Ms,
		P99Ms:            st.P99Ms,
		Errors:           errCount.Load(),
	}
	if e, ok := firstErr.Load().(string); ok {
		r.FirstError = e
	}
	if r.Requests == 0 {
		return r, fmt.Errorf("no request completed (%d errors; first: %s)", r.Errors, r.FirstError)
	}
	return r, nil
}

// sizeQuery is the path that asks the upstream for n bytes.
func sizeQuery(n int64) string { return "/?size=" + strconv.FormatInt(n, 10) }

package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"

	"github.com/gmgate/gmgate/tlcp"
)

// HandshakeSchema names the layout of HandshakeReport in JSON.
const HandshakeSchema = "gmgate.bench.handshake/v1"

// Defaults of gmgate bench handshake.
const (
	DefaultConcurrency       = 64
	DefaultHandshakeDuration = 10 * time.Second
	DefaultHandshakeWarmup   = 2 * time.Second
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultHTTPBody          = 1024
	DefaultPeak              = 10000
	// MaxHTTPBody bounds the self-started server's responses.
	MaxHTTPBody = 64 << 20
)

// HandshakeOptions says what RunHandshake does.
type HandshakeOptions struct {
	// Scenarios to run one after the other; see ParseScenarios.
	Scenarios []Scenario
	// Target is host:port of a server to load; empty starts one in a
	// child process on loopback.
	Target string
	// MetricsURL is the target's Prometheus endpoint, read for
	// process_cpu_seconds_total before and after each measurement.
	MetricsURL string
	// ServerPID is the process ID of a target on this machine (any
	// server, gmgate or not): its CPU time, and its children's, is read
	// from /proc before and after each measurement.
	ServerPID int
	// ServerName is checked against the server's certificate (with CAFile)
	// and sent as the HTTP Host.
	ServerName string
	// CAFile, when set, is a PEM file of CA certificates the server's
	// certificates must verify against; without it they are not verified,
	// so that the load generator spends its CPU on load.
	CAFile string
	// Concurrency is the number of connections in flight
	// (DefaultConcurrency when zero).
	Concurrency int
	// Duration of each measurement (DefaultHandshakeDuration when zero),
	// after Warmup (none when zero) whose handshakes are not counted.
	Duration, Warmup time.Duration
	// Timeout bounds each connection (DefaultHandshakeTimeout when zero).
	Timeout time.Duration
	// Rate, when positive, caps new connections per second.
	Rate float64
	// HTTPPath, when set, makes each connection send one GET request for
	// it and read the response (the mixed workload).
	HTTPPath string
	// HTTPBody is the size of the self-started server's HTTP responses
	// (DefaultHTTPBody when zero, at most MaxHTTPBody).
	HTTPBody int
	// Peak is the handshake rate the capacity lines plan for; zero has
	// none.
	Peak float64
	// Rounds runs all scenarios this many times in turn (1 when zero) and
	// adds up each scenario's windows, so that a disturbance of the
	// machine spreads over the scenarios rather than falling on one.
	Rounds int

	// ServerCores is how many CPUs the self-started server gets (default
	// 1); it is bound to the last ones this process may use, with
	// GOMAXPROCS set to match. With a Target it is how many CPUs the
	// server has, for its busy share (with ServerPID, the CPUs the
	// process may use when not given).
	ServerCores int
	// PinLoadGenerator binds this process to the CPUs the server does not
	// get, for the run.
	PinLoadGenerator bool
	// Identity is the self-started server's TLCP identity; generated
	// software keys when empty.
	Identity ServerIdentity
	// ServerProfileDir, when set, receives a CPU profile of the
	// self-started server's measured window per scenario
	// (NAME.cpu.pprof), for go tool pprof.
	ServerProfileDir string
	// Launcher starts the server child (default SelfLauncher("bench",
	// "serve-child")).
	Launcher Launcher
	// Baseline, when set, starts a second server child from another
	// gmgate binary (BaselinePath, shown in reports): each round runs
	// every scenario against both, in alternating order, and the report
	// gives this build's handshakes per server CPU-second over the
	// baseline's, per round.
	Baseline     Launcher
	BaselinePath string
	// Progress, when set, receives a line per scenario as it ends.
	Progress io.Writer
}

// HandshakeReport is the outcome of RunHandshake.
type HandshakeReport struct {
	Schema  string           `json:"schema"`
	Started time.Time        `json:"started"`
	Machine Machine          `json:"machine"`
	Server  ServerInfo       `json:"server"`
	Load    LoadInfo         `json:"load"`
	Results []ScenarioResult `json:"results"`
	// Warnings say what makes the figures mean less than they seem: a
	// server that was not saturated, a server sharing CPUs with the load
	// generator.
	Warnings []string `json:"warnings,omitempty"`
	// Comparison is the ratio of full TLCP handshakes per server
	// CPU-second to TLS 1.2's, when both ran.
	Comparison *Comparison `json:"comparison,omitempty"`
	Capacity   []Capacity  `json:"capacity,omitempty"`
	// LoadAverage is the 1-minute load average before and after the run.
	LoadAverage [2]float64 `json:"load_average"`
	// Baseline has the baseline build's figures and the ratios, with
	// HandshakeOptions.Baseline.
	Baseline *BaselineComparison `json:"baseline,omitempty"`
}

// BaselineComparison sets this build against a baseline binary run in the
// same rounds.
type BaselineComparison struct {
	Path    string           `json:"path"`
	Results []ScenarioResult `json:"results"`
	// Ratios has, per scenario, this build's handshakes per server
	// CPU-second over the baseline's: per round, and their median and
	// spread.
	Ratios []BaselineRatio `json:"ratios"`
}

// BaselineRatio is one scenario's ratio of this build to the baseline.
type BaselineRatio struct {
	Scenario string    `json:"scenario"`
	Rounds   []float64 `json:"rounds"`
	Summary  Summary   `json:"summary"`
}

// ServerInfo describes the server that was loaded.
type ServerInfo struct {
	// Mode is "child" (started here) or "remote".
	Mode    string `json:"mode"`
	Address string `json:"address,omitempty"`
	// CPUs and GOMAXPROCS of the child.
	CPUs       []int `json:"cpus,omitempty"`
	GOMAXPROCS int   `json:"gomaxprocs,omitempty"`
	// KeyBackend holds the TLCP keys (sign/enc).
	KeyBackend string `json:"key_backend,omitempty"`
	// CPUSource says where the server's CPU time comes from: "getrusage"
	// (child), the metrics URL or "/proc/PID" (remote), or "" when
	// unknown.
	CPUSource string `json:"cpu_source,omitempty"`
	// Cores is how many CPUs the server's busy share is taken over; 0
	// when unknown.
	Cores int `json:"cores,omitempty"`
}

// LoadInfo describes the load.
type LoadInfo struct {
	Concurrency     int     `json:"concurrency"`
	Rounds          int     `json:"rounds"`
	DurationSeconds float64 `json:"duration_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	TimeoutSeconds  float64 `json:"timeout_seconds"`
	Rate            float64 `json:"rate,omitempty"`
	HTTPPath        string  `json:"http_path,omitempty"`
	// CPUs the load generator ran on: those it was bound to, or those
	// this process may use (taskset) with a remote target.
	CPUs []int `json:"cpus,omitempty"`
	// VerifiesCertificates is true when server certificates were verified.
	VerifiesCertificates bool `json:"verifies_certificates"`
}

// ScenarioResult holds one scenario's figures for the measured window.
// Its Name is what most handshakes negotiated ("TLS1.3 X25519 RSA-2048");
// Requested is the scenario as asked for.
type ScenarioResult struct {
	Scenario
	Requested string `json:"requested"`
	// Negotiated counts handshakes by what they agreed on (resumed ones
	// marked so).
	Negotiated map[string]int64 `json:"negotiated,omitempty"`
	// StoppedEarly is set when every connection of the scenario's first
	// second failed and it stopped then; the figures cover that time.
	StoppedEarly bool `json:"stopped_early,omitempty"`
	// WindowSeconds is the measured window's length.
	WindowSeconds float64 `json:"window_seconds"`
	// Handshakes completed in the window: FullHandshakes + Resumed.
	Handshakes       int64   `json:"handshakes"`
	FullHandshakes   int64   `json:"full_handshakes"`
	Resumed          int64   `json:"resumed"`
	HandshakesPerSec float64 `json:"handshakes_per_sec"`
	// Latency from the start of the TCP connect to the end of the
	// handshake, one sample per handshake counted.
	Latency LatencyStats `json:"latency"`
	// Requests answered in the window and their latency (connect to the
	// end of the response), with HTTPPath.
	Requests       int64         `json:"requests"`
	RequestLatency *LatencyStats `json:"request_latency,omitempty"`
	// Errors by kind in the window; ErrorCount is their sum.
	Errors     map[string]int64 `json:"errors"`
	ErrorCount int64            `json:"error_count"`
	// ServerCPUSeconds is the server's CPU time in the window, 0 when
	// unknown; ServerBusy is that over the window and the server's cores.
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	ServerBusy       float64 `json:"server_busy"`
	// HandshakesPerServerCPUSecond is Handshakes / ServerCPUSeconds: what
	// one core of the server does.
	HandshakesPerServerCPUSecond float64 `json:"handshakes_per_server_cpu_second"`
	// ServerHandshakes is what the self-started server counted in its
	// window (which differs from the client's by the handshakes in flight
	// at either edge); -1 when unknown.
	ServerHandshakes int64 `json:"server_handshakes"`
	// LoadCPUSeconds is the load generator's CPU time in the window, and
	// LoadBusy that over the window and its CPUs.
	LoadCPUSeconds float64 `json:"load_cpu_seconds"`
	LoadBusy       float64 `json:"load_busy"`
	// Rounds is how many measured windows (one per round) the figures add
	// up; with more than one, RoundHandshakesPerServerCPUSecond has each
	// round's figure, to show how steady the machine was.
	Rounds                            int       `json:"rounds"`
	RoundHandshakesPerServerCPUSecond []float64 `json:"round_handshakes_per_server_cpu_second,omitempty"`
}

// Comparison relates two scenarios' handshakes per server CPU-second.
type Comparison struct {
	Numerator   string  `json:"numerator"`
	Denominator string  `json:"denominator"`
	Ratio       float64 `json:"ratio"`
}

// Capacity is the number of server cores a scenario needs for the peak.
type Capacity struct {
	Scenario string  `json:"scenario"`
	Peak     float64 `json:"peak_handshakes_per_sec"`
	Cores    float64 `json:"cores"`
}

// cpuReader returns the server's CPU time so far and, where known, the
// handshakes it has completed (else -1).
type cpuReader func(ctx context.Context) (time.Duration, int64, error)

func (o *HandshakeOptions) defaults() error {
	if o.Concurrency < 0 || o.Rounds < 0 {
		return errors.New("concurrency and rounds cannot be negative")
	}
	if o.Duration < 0 || o.Warmup < 0 || o.Timeout < 0 {
		return errors.New("durations cannot be negative")
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Duration == 0 {
		o.Duration = DefaultHandshakeDuration
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultHandshakeTimeout
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return fmt.Errorf("rate %g: give a positive number of handshakes per second (or 0 for no limit)", o.Rate)
	}
	if o.HTTPBody == 0 {
		o.HTTPBody = DefaultHTTPBody
	}
	if o.HTTPBody < 0 || o.HTTPBody > MaxHTTPBody {
		return fmt.Errorf("HTTP body of %d bytes: give 1 byte to 64 MiB", o.HTTPBody)
	}
	if o.ServerCores < 0 {
		return errors.New("server cores cannot be negative")
	}
	if o.ServerCores == 0 && o.Target == "" {
		o.ServerCores = 1
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Launcher == nil {
		o.Launcher = SelfLauncher("bench", "serve-child")
	}
	if !(o.Peak >= 0) || math.IsInf(o.Peak, 0) {
		return fmt.Errorf("peak %g: give 0 (no capacity lines) or more handshakes per second", o.Peak)
	}
	if o.HTTPPath != "" && o.HTTPPath[0] != '/' {
		return fmt.Errorf("HTTP path %q must start with /", o.HTTPPath)
	}
	if o.Target != "" {
		if _, _, err := net.SplitHostPort(o.Target); err != nil {
			return fmt.Errorf("target %q: give host:port (%v)", o.Target, err)
		}
		if !o.Identity.empty() {
			return errors.New("server certificates and keys are for the self-started server; a target has its own")
		}
		if o.ServerProfileDir != "" {
			return errors.New("server profiles are taken of the self-started server; profile a target where it runs")
		}
		if o.MetricsURL != "" && o.ServerPID != 0 {
			return errors.New("give the target's CPU time one way: a metrics URL or a server PID")
		}
		if o.ServerPID < 0 {
			return fmt.Errorf("server PID %d: give the process ID of the server", o.ServerPID)
		}
		if o.Baseline != nil {
			return errors.New("a baseline binary is for the self-started server; load a target with each build in turn instead")
		}
	} else if o.MetricsURL != "" || o.ServerPID != 0 {
		return errors.New("a metrics URL or a server PID is for a remote target; the self-started server's CPU is read with getrusage")
	}
	if len(o.Scenarios) == 0 {
		list := DefaultComparison
		if o.Target != "" {
			list = "ECC_SM4_GCM_SM3"
		}
		s, err := ParseScenarios(list, 0)
		if err != nil {
			return err
		}
		o.Scenarios = s
	}
	return o.Identity.check()
}

// RunHandshake loads a TLCP or TLS server with new connections, one full
// or resumed handshake each, and reports rates, latencies, errors and the
// server's CPU cost per handshake.
func RunHandshake(ctx context.Context, opts HandshakeOptions) (*HandshakeReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	rep := &HandshakeReport{
		Schema:  HandshakeSchema,
		Started: time.Now().UTC().Truncate(time.Second),
		Machine: DetectMachine(),
		Load: LoadInfo{
			Concurrency: opts.Concurrency, Rounds: opts.Rounds, DurationSeconds: opts.Duration.Seconds(), WarmupSeconds: opts.Warmup.Seconds(),
			TimeoutSeconds: opts.Timeout.Seconds(), Rate: opts.Rate, HTTPPath: opts.HTTPPath,
			VerifiesCertificates: opts.CAFile != "",
		},
	}
	rep.LoadAverage[0] = loadAverage()

	roots, err := loadRoots(opts.CAFile)
	if err != nil {
		return nil, err
	}
	run := &handshakeRun{opts: opts, roots: roots, rep: rep}
	if opts.Target == "" {
		err = run.selfStarted(ctx)
	} else {
		err = run.remote(ctx)
	}
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, t := range run.tallies {
		res := t.result()
		rep.Results = append(rep.Results, res)
		if res.Handshakes == 0 {
			dead = append(dead, res.Name)
		}
	}
	if opts.Baseline != nil {
		rep.Baseline = &BaselineComparison{Path: opts.BaselinePath}
		for i, t := range run.baseTallies {
			res := t.result()
			rep.Baseline.Results = append(rep.Baseline.Results, res)
			if res.Handshakes == 0 {
				dead = append(dead, res.Name+" (baseline)")
			}
			mine := run.tallies[i].result()
			ratio := BaselineRatio{Scenario: mine.Name}
			for r, v := range res.RoundHandshakesPerServerCPUSecond {
				if r < len(mine.RoundHandshakesPerServerCPUSecond) && v > 0 {
					ratio.Rounds = append(ratio.Rounds, mine.RoundHandshakesPerServerCPUSecond[r]/v)
				}
			}
			ratio.Summary = summarizeRounds(ratio.Rounds)
			rep.Baseline.Ratios = append(rep.Baseline.Ratios, ratio)
		}
	}
	rep.LoadAverage[1] = loadAverage()
	rep.Comparison = compare(rep.Results)
	if opts.Peak > 0 {
		for _, r := range rep.Results {
			if r.HandshakesPerServerCPUSecond > 0 {
				rep.Capacity = append(rep.Capacity, Capacity{Scenario: r.Name, Peak: opts.Peak, Cores: opts.Peak / r.HandshakesPerServerCPUSecond})
			}
		}
	}
	rep.Warnings = append(run.warnings, saturationWarnings(rep.Results, opts.Rate > 0)...)
	if len(dead) > 0 {
		return rep, fmt.Errorf("%w: %s (see the errors by kind)", ErrNoHandshake, strings.Join(dead, ", "))
	}
	return rep, nil
}

// ErrNoHandshake is returned, with the report, when a scenario completed
// no handshake at all.
var ErrNoHandshake = errors.New("no handshake succeeded")

// saturationWarnings flags scenarios whose server was busy well under
// its cores: the load, not the server, set the pace.
func saturationWarnings(results []ScenarioResult, paced bool) []string {
	var out []string
	for _, r := range results {
		if r.ServerBusy <= 0 || r.ServerBusy >= saturated || r.StoppedEarly {
			continue
		}
		why := "the load generator or --concurrency was the limit"
		switch {
		case paced:
			why = "--rate held the load back"
		case r.LoadBusy >= saturated:
			why = fmt.Sprintf("the load generator was busy %s: give it more CPUs, or run it on another machine", percent(r.LoadBusy))
		case r.LoadBusy > 0:
			why = fmt.Sprintf("the load generator was busy only %s too: other work on this machine took their CPUs, or --concurrency was too low", percent(r.LoadBusy))
		}
		out = append(out, fmt.Sprintf("%s: the server was busy %s of its cores, so it was not saturated (%s); handshakes/s is not its capacity, and handshakes per server CPU-second may differ from a saturated server's", r.Name, percent(r.ServerBusy), why))
	}
	return out
}

// saturated is the busy share from which a server (or load generator)
// counts as saturated.
const saturated = 0.85

// handshakeRun carries one RunHandshake.
type handshakeRun struct {
	warnings   []string
	opts       HandshakeOptions
	roots      *certRoots
	rep        *HandshakeReport
	clientCert *tlcp.Certificate
	loadCPUs   int
	// tallies has one entry per scenario, adding up the rounds;
	// baseTallies the same for the baseline build.
	tallies, baseTallies []*tally
}

// addRound adds a round of scenario i to tallies.
func addRound(tallies *[]*tally, i int, t *tally) {
	if i < len(*tallies) {
		(*tallies)[i].add(t)
	} else {
		*tallies = append(*tallies, t)
	}
}

// record adds a round of scenario i.
func (r *handshakeRun) record(i int, t *tally) { addRound(&r.tallies, i, t) }

func (r *handshakeRun) needsClientCert() bool {
	return slices.ContainsFunc(r.opts.Scenarios, Scenario.needsClientCert)
}

func (r *handshakeRun) selfStarted(ctx context.Context) error {
	opts := r.opts
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	if opts.ServerCores > len(allowed) {
		return fmt.Errorf("the server cannot have %d cores: this process may use %d (%v)", opts.ServerCores, len(allowed), allowed)
	}
	serverCPUs := allowed[len(allowed)-opts.ServerCores:]
	loadCPUs := allowed[:len(allowed)-opts.ServerCores]
	r.loadCPUs = len(allowed)
	if opts.PinLoadGenerator && len(loadCPUs) > 0 {
		if err := pinProcess(loadCPUs); err != nil {
			return err
		}
		// As many Ps as CPUs, so that the Go scheduler and not the
		// kernel shares them out.
		procs := runtime.GOMAXPROCS(len(loadCPUs))
		defer func() {
			runtime.GOMAXPROCS(procs)
			_ = pinProcess(allowed)
		}()
		r.rep.Load.CPUs = loadCPUs
		r.loadCPUs = len(loadCPUs)
	}
	switch {
	case len(loadCPUs) == 0:
		r.warnings = append(r.warnings, fmt.Sprintf("the server has all %d CPUs this process may use (--server-cores %d), so the load generator runs on the same CPUs: they compete, the server cannot be saturated, and its CPU time per handshake includes the contention; give the server fewer CPUs", len(allowed), opts.ServerCores))
	case !opts.PinLoadGenerator:
		r.warnings = append(r.warnings, fmt.Sprintf("the load generator is not bound away from the server's CPUs %v, so they may share CPUs", serverCPUs))
	}

	dir, err := os.MkdirTemp("", "gmgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ids, err := makeIdentities(dir, opts.Identity)
	if err != nil {
		return err
	}
	r.clientCert = ids.client
	r.rep.Server = ServerInfo{Mode: "child", CPUs: serverCPUs, CPUSource: "getrusage", Cores: len(serverCPUs)}
	if opts.ServerProfileDir != "" {
		if err := os.MkdirAll(opts.ServerProfileDir, 0o755); err != nil {
			return fmt.Errorf("server profile directory: %w", err)
		}
	}

	for round := range opts.Rounds {
		for i, sc := range opts.Scenarios {
			if opts.Baseline == nil {
				t, err := r.selfStartedScenario(ctx, sc, ids, serverCPUs, round, opts.Launcher, "")
				if err != nil {
					return fmt.Errorf("%s: %w", sc.Name, err)
				}
				r.record(i, t)
				continue
			}
			// This build and the baseline in turn, the order
			// alternating by round so that a drift of the machine
			// favours neither.
			baselineFirst := round%2 == 1
			for k := range 2 {
				if (k == 0) != baselineFirst {
					t, err := r.selfStartedScenario(ctx, sc, ids, serverCPUs, round, opts.Launcher, "")
					if err != nil {
						return fmt.Errorf("%s: %w", sc.Name, err)
					}
					r.record(i, t)
				} else {
					t, err := r.selfStartedScenario(ctx, sc, ids, serverCPUs, round, opts.Baseline, "baseline.")
					if err != nil {
						return fmt.Errorf("%s, baseline %s: %w", sc.Name, opts.BaselinePath, err)
					}
					addRound(&r.baseTallies, i, t)
				}
			}
		}
	}
	return nil
}

// selfStartedScenario runs one round of a scenario against a new child
// that launch starts; profilePrefix goes in front of its profile's name.
func (r *handshakeRun) selfStartedScenario(ctx context.Context, sc Scenario, ids *identities, serverCPUs []int, round int, launch Launcher, profilePrefix string) (*tally, error) {
	opts := r.opts
	cfg := childConfig{
		Protocol: "tls", CPUs: serverCPUs, GOMAXPROCS: len(serverCPUs),
		TLSCert: ids.tlsCert, TLSKey: ids.tlsKey, HTTPBody: opts.HTTPBody, HandshakeTimeout: opts.Timeout,
	}
	switch sc.Protocol {
	case ProtoTLCP:
		cfg.Protocol = "tlcp"
		cfg.SignCert, cfg.SignKey, cfg.EncCert, cfg.EncKey = ids.tlcp.SignCert, ids.tlcp.SignKey, ids.tlcp.EncCert, ids.tlcp.EncKey
	case ProtoTLS13SM:
		cfg.Protocol = "tls13sm"
		cfg.SignCert, cfg.SignKey = ids.tlcp.SignCert, ids.tlcp.SignKey
	}
	if opts.ServerProfileDir != "" {
		var err error
		if cfg.CPUProfile, err = filepath.Abs(filepath.Join(opts.ServerProfileDir, profilePrefix+profileName(sc.Name, round))); err != nil {
			return nil, err
		}
	}
	child, err := startChild(ctx, launch, cfg)
	if err != nil {
		return nil, err
	}
	r.rep.Server.GOMAXPROCS = child.ready.GOMAXPROCS
	if sc.Protocol == ProtoTLCP {
		r.rep.Server.KeyBackend = child.ready.KeyBackend
	}
	probe := serverProbe{read: func(ctx context.Context) (time.Duration, int64, error) {
		st, err := child.stats(ctx)
		return st.cpu(), st.Handshakes, err
	}}
	if cfg.CPUProfile != "" {
		probe.windowStart = func(ctx context.Context) error { _, err := child.command(ctx, "profile-start"); return err }
		probe.windowEnd = func(ctx context.Context) error { _, err := child.command(ctx, "profile-stop"); return err }
	}
	t, err := r.scenario(ctx, sc, child.ready.Addr, probe, len(serverCPUs))
	child.stop()
	return t, err
}

func (r *handshakeRun) remote(ctx context.Context) error {
	opts := r.opts
	r.rep.Server = ServerInfo{Mode: "remote", Address: opts.Target, Cores: opts.ServerCores}
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	r.loadCPUs = len(allowed)
	r.rep.Load.CPUs = allowed
	if r.needsClientCert() {
		if r.clientCert, err = clientIdentity(); err != nil {
			return err
		}
	}
	var read cpuReader
	if opts.MetricsURL != "" {
		r.rep.Server.CPUSource = opts.MetricsURL
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		read = func(ctx context.Context) (time.Duration, int64, error) {
			d, err := scrapeCPU(ctx, client, opts.MetricsURL)
			return d, -1, err
		}
		// Fail early on a wrong URL rather than after the warm-up.
		if _, _, err := read(ctx); err != nil {
			return err
		}
	}
	if opts.ServerPID != 0 {
		r.rep.Server.CPUSource = fmt.Sprintf("/proc/%d", opts.ServerPID)
		pid := opts.ServerPID
		read = func(context.Context) (time.Duration, int64, error) {
			d, err := processTreeCPU(pid)
			return d, -1, err
		}
		if _, _, err := read(ctx); err != nil {
			return err
		}
		if cpus, err := processCPUs(pid); err == nil {
			if r.rep.Server.Cores == 0 {
				r.rep.Server.Cores = len(cpus)
			}
			r.rep.Server.CPUs = cpus
			if shared := intersect(cpus, allowed); len(shared) > 0 {
				r.warnings = append(r.warnings, fmt.Sprintf("the server (PID %d) may run on CPUs %s, and the load generator on %s: they share CPUs %s, so the server cannot be saturated and its CPU time per handshake includes the contention; bind them apart (taskset -c)", pid, cpuList(cpus), cpuList(allowed), cpuList(shared)))
			}
		}
	}
	for range opts.Rounds {
		for i, sc := range opts.Scenarios {
			t, err := r.scenario(ctx, sc, opts.Target, serverProbe{read: read}, r.rep.Server.Cores)
			if err != nil {
				return fmt.Errorf("%s: %w", sc.Name, err)
			}
			r.record(i, t)
		}
	}
	return nil
}

// intersect returns the CPUs in both lists.
func intersect(a, b []int) []int {
	var out []int
	for _, c := range a {
		if slices.Contains(b, c) {
			out = append(out, c)
		}
	}
	return out
}

// profileName turns a scenario name and round into a file name.
func profileName(scenario string, round int) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, scenario)
	if round > 0 {
		name += fmt.Sprintf(".%d", round+1)
	}
	return name + ".cpu.pprof"
}

// certRoots are the CA certificates to verify the server against, for
// both stacks.
type certRoots struct {
	sm  *smx509.CertPool
	std *x509.CertPool
}

func loadRoots(file string) (*certRoots, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates: %w", err)
	}
	cas, err := certs.ParseCABundle(file, pem)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates: %w", err)
	}
	r := &certRoots{sm: smx509.NewCertPool(), std: x509.NewCertPool()}
	for _, c := range cas {
		r.sm.AddCert(c)
		// crypto/tls takes the CAs it can parse (not SM2 ones).
		if std, err := x509.ParseCertificate(c.Raw); err == nil {
			r.std.AddCert(std)
		}
	}
	return r, nil
}

// compare finds the first full-handshake TLCP ECC scenario and the first
// full-handshake TLS 1.2 scenario with CPU figures.
func compare(rs []ScenarioResult) *Comparison {
	var num, den *ScenarioResult
	for i := range rs {
		r := &rs[i]
		if r.ResumeRatio != 0 || r.HandshakesPerServerCPUSecond <= 0 {
			continue
		}
		if num == nil && r.Protocol == ProtoTLCP && r.Suite == "ECC_SM4_GCM_SM3" {
			num = r
		}
		if den == nil && r.Protocol == ProtoTLS12 {
			den = r
		}
	}
	if num == nil || den == nil {
		return nil
	}
	return &Comparison{Numerator: num.Name, Denominator: den.Name, Ratio: num.HandshakesPerServerCPUSecond / den.HandshakesPerServerCPUSecond}
}

// tlsVersion returns the TLS version a TLS scenario pins.
func tlsVersion(p string) uint16 {
	if p == ProtoTLS13 {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

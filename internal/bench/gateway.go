package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// This file runs whole gmgate gateways for the gateway benchmarks (RunProxy,
// RunDownload, RunIdleConns): `gmgate serve` of each build under test in a
// child process, in front of an upstream HTTP server in another child
// process, with the load generator in this one. Builds are any gmgate
// binaries: the configuration written here uses only keys that every
// version reads.

// GatewayCommand makes the command that runs a gmgate binary with args.
type GatewayCommand func(args ...string) *exec.Cmd

// BinaryCommand runs the gmgate binary at path.
func BinaryCommand(path string) GatewayCommand {
	return func(args ...string) *exec.Cmd { return exec.Command(path, args...) }
}

// GatewayBuild is one gmgate binary under test.
type GatewayBuild struct {
	// Name labels the build in reports ("this build", "baseline").
	Name string
	// Path is shown in reports.
	Path    string
	Command GatewayCommand
}

// GatewayOptions are what the gateway benchmarks share.
type GatewayOptions struct {
	// Builds are measured in turn in every round, in alternating order.
	Builds []GatewayBuild
	// Upstream runs this program's upstream server: Upstream("bench",
	// "upstream-child", CONFIG) must start UpstreamChild.
	Upstream GatewayCommand
	// ServerCores is how many CPUs each gateway gets (default 1): the last
	// ones this process may use, GOMAXPROCS to match. The load generator
	// and the upstream share the others.
	ServerCores int
	// PinLoadGenerator binds this process to the CPUs the gateways do not
	// get.
	PinLoadGenerator bool
	// Rounds is how many times every measurement is taken (default 5);
	// reports give the median and the lowest and highest.
	Rounds int
	// AccessLog makes the gateways write their access log (to a file in
	// the work directory), as a production gateway does.
	AccessLog bool
	// Progress, when set, receives a line per measurement.
	Progress io.Writer
	// pprof serves Go's profiles on the admin listener of the first
	// build's gateway (admin.pprof, which older builds may not know).
	pprof bool
}

func (o *GatewayOptions) defaults() error {
	if len(o.Builds) == 0 {
		return errors.New("no gmgate build to measure")
	}
	if o.Upstream == nil {
		return errors.New("no command for the upstream server")
	}
	if o.ServerCores < 0 || o.Rounds < 0 {
		return errors.New("server cores and rounds cannot be negative")
	}
	if o.ServerCores == 0 {
		o.ServerCores = 1
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	return nil
}

// GatewaySetup describes how a gateway benchmark ran.
type GatewaySetup struct {
	Builds []BuildInfo `json:"builds"`
	// ServerCPUs are the CPUs of each gateway, LoadCPUs those of the load
	// generator and the upstream (empty when not bound).
	ServerCPUs []int `json:"server_cpus,omitempty"`
	GOMAXPROCS int   `json:"gomaxprocs"`
	LoadCPUs   []int `json:"load_cpus,omitempty"`
	Rounds     int   `json:"rounds"`
	AccessLog  bool  `json:"access_log"`
	// CPUSource says where a gateway's CPU time comes from.
	CPUSource string `json:"cpu_source"`
}

// GatewayReportHead is what the reports of the gateway benchmarks share.
type GatewayReportHead struct {
	Schema  string       `json:"schema"`
	Started time.Time    `json:"started"`
	Machine Machine      `json:"machine"`
	Setup   GatewaySetup `json:"setup"`
	// LoadAverage is the 1-minute load average before and after the run.
	LoadAverage [2]float64 `json:"load_average"`
}

// startRun sets up a gateway benchmark: the report's head and the
// environment, whose upstream answers with upstreamBody bytes.
func startRun(ctx context.Context, opts *GatewayOptions, schema string, upstreamBody int) (*gatewayEnv, GatewayReportHead, error) {
	head := GatewayReportHead{Schema: schema, Started: time.Now().UTC(), Machine: DetectMachine()}
	head.LoadAverage[0] = loadAverage()
	env, err := newGatewayEnv(ctx, opts, upstreamBody)
	if err != nil {
		return nil, head, err
	}
	head.Setup = env.setup
	return env, head, nil
}

// end notes the load average at the end of the run.
func (h *GatewayReportHead) end() { h.LoadAverage[1] = loadAverage() }

// BuildInfo names a build in a report.
type BuildInfo struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
}

// gatewayEnv is what the gateways of one run share: a work directory with
// certificates, the upstream, the CPU split.
type gatewayEnv struct {
	opts       *GatewayOptions
	dir        string
	ids        *identities
	upstream   *upstreamProcess
	serverCPUs []int
	loadCPUs   []int
	setup      GatewaySetup
}

func newGatewayEnv(ctx context.Context, opts *GatewayOptions, upstreamBody int) (*gatewayEnv, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gmgate-bench-")
	if err != nil {
		return nil, err
	}
	env := &gatewayEnv{opts: opts, dir: dir}
	if env.ids, err = makeIdentities(dir, ServerIdentity{}); err != nil {
		env.close()
		return nil, err
	}
	if cpus, err := allowedCPUs(); err == nil && len(cpus) > opts.ServerCores {
		env.serverCPUs = cpus[len(cpus)-opts.ServerCores:]
		env.loadCPUs = cpus[:len(cpus)-opts.ServerCores]
	}
	if opts.PinLoadGenerator && len(env.loadCPUs) > 0 {
		if err := pinProcess(env.loadCPUs); err != nil {
			env.close()
			return nil, err
		}
	}
	env.upstream, err = startUpstream(ctx, opts.Upstream, upstreamConfig{Body: upstreamBody, CPUs: env.loadCPUs})
	if err != nil {
		env.close()
		return nil, err
	}
	env.setup = GatewaySetup{
		ServerCPUs: env.serverCPUs,
		GOMAXPROCS: opts.ServerCores,
		LoadCPUs:   env.loadCPUs,
		Rounds:     opts.Rounds,
		AccessLog:  opts.AccessLog,
		CPUSource:  "/proc/PID/stat (utime+stime)",
	}
	for _, b := range opts.Builds {
		env.setup.Builds = append(env.setup.Builds, BuildInfo{Name: b.Name, Path: b.Path, Version: buildVersion(b)})
	}
	return env, nil
}

func (e *gatewayEnv) close() {
	if e.upstream != nil {
		e.upstream.stop()
	}
	os.RemoveAll(e.dir)
}

// buildVersion is the first line of `gmgate version`, or "" when it does
// not answer.
func buildVersion(b GatewayBuild) string {
	out, err := b.Command("version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// Gateway listeners, one per protocol the benchmarks speak.
const (
	listenerGCM = "tlcp-gcm"
	listenerCBC = "tlcp-cbc"
	listenerTLS = "tls"
)

// gatewaySet is a running gateway of each build, by build name.
type gatewaySet map[string]*gatewayProcess

// startGateways starts a gateway of every build; stop the set even when
// it fails.
func (e *gatewayEnv) startGateways(ctx context.Context, maxConns int) (gatewaySet, error) {
	set := gatewaySet{}
	for _, b := range e.opts.Builds {
		g, err := e.startGateway(ctx, b, maxConns)
		if err != nil {
			return set, err
		}
		set[b.Name] = g
	}
	return set, nil
}

func (s gatewaySet) stop() {
	for _, g := range s {
		g.stop()
	}
}

// gatewayProcess is a running `gmgate serve`.
type gatewayProcess struct {
	build GatewayBuild
	cmd   *exec.Cmd
	log   *os.File
	admin string
	addrs map[string]string // by listener name
	done  chan struct{}
	err   error // set when done closes
}

// freePorts finds n free loopback ports. Another process could take one
// before the gateway binds it; the gateway then fails to start and says
// so.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startGateway writes a configuration for b and starts it, bound to the
// server CPUs, and waits until it is ready.
func (e *gatewayEnv) startGateway(ctx context.Context, b GatewayBuild, maxConns int) (*gatewayProcess, error) {
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	g := &gatewayProcess{
		build: b,
		admin: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		addrs: map[string]string{
			listenerGCM: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			listenerCBC: fmt.Sprintf("127.0.0.1:%d", ports[2]),
			listenerTLS: fmt.Sprintf("127.0.0.1:%d", ports[3]),
		},
		done: make(chan struct{}),
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(b.Name))
	access := "off"
	if e.opts.AccessLog {
		access = filepath.Join(e.dir, name+".access.log")
	}
	cfgFile := filepath.Join(e.dir, name+".yaml")
	if err := os.WriteFile(cfgFile, []byte(e.gatewayConfig(g, access, maxConns)), 0o600); err != nil {
		return nil, err
	}
	if g.log, err = os.Create(filepath.Join(e.dir, name+".log")); err != nil {
		return nil, err
	}
	g.cmd = b.Command("serve", "-c", cfgFile)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if g.cmd.Env == nil {
		g.cmd.Env = os.Environ()
	}
	g.cmd.Env = append(g.cmd.Env, "GOMAXPROCS="+strconv.Itoa(e.opts.ServerCores))
	if err := g.cmd.Start(); err != nil {
		g.log.Close()
		return nil, fmt.Errorf("starting %s: %w", b.Name, err)
	}
	go func() {
		g.err = g.cmd.Wait()
		close(g.done)
	}()
	if err := g.waitReady(ctx, e.serverCPUs); err != nil {
		g.stop()
		return nil, fmt.Errorf("%s (%s): %w", b.Name, b.Path, err)
	}
	return g, nil
}

func (e *gatewayEnv) gatewayConfig(g *gatewayProcess, access string, maxConns int) string {
	id := e.ids.tlcp
	var b strings.Builder
	fmt.Fprintf(&b, "admin:\n  listen: %s\n", g.admin)
	if e.opts.pprof && g.build.Name == e.opts.Builds[0].Name {
		b.WriteString("  pprof: true\n")
	}
	fmt.Fprintf(&b, "log:\n  level: warn\n  access: %q\n", access)
	fmt.Fprintf(&b, "limits:\n  max_connections: %d\n", maxConns)
	fmt.Fprintf(&b, "timeouts:\n  idle: 10m\n  shutdown: 2s\n")
	b.WriteString("listeners:\n")
	for _, l := range []struct{ name, suite string }{{listenerGCM, "ECC_SM4_GCM_SM3"}, {listenerCBC, "ECC_SM4_CBC_SM3"}} {
		fmt.Fprintf(&b, "  - name: %s\n    listen: %s\n    protocol: tlcp\n", l.name, g.addrs[l.name])
		fmt.Fprintf(&b, "    tlcp:\n      sign_cert: %q\n      sign_key: %q\n      enc_cert: %q\n      enc_key: %q\n      suites: [%s]\n",
			id.SignCert, id.SignKey, id.EncCert, id.EncKey, l.suite)
		b.WriteString("    routes:\n      - upstream: app\n")
	}
	fmt.Fprintf(&b, "  - name: %s\n    listen: %s\n    protocol: tls\n", listenerTLS, g.addrs[listenerTLS])
	fmt.Fprintf(&b, "    tls:\n      cert: %q\n      key: %q\n", e.ids.tlsCert, e.ids.tlsKey)
	b.WriteString("    routes:\n      - upstream: app\n")
	fmt.Fprintf(&b, "upstreams:\n  app:\n    targets: [\"http://%s\"]\n", e.upstream.addr)
	return b.String()
}

// waitReady polls /readyz until the gateway answers, binding it to cpus
// as its threads appear.
func (g *gatewayProcess) waitReady(ctx context.Context, cpus []int) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if len(cpus) > 0 {
			if err := pinPID(g.cmd.Process.Pid, cpus); err != nil {
				return err
			}
		}
		resp, err := client.Get("http://" + g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// Threads started before the last pass inherit the set.
				if len(cpus) > 0 {
					return pinPID(g.cmd.Process.Pid, cpus)
				}
				return nil
			}
		}
		select {
		case <-g.done:
			return fmt.Errorf("exited (%v): %s", g.err, g.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 30s: %s", g.logTail())
		}
	}
}

func (g *gatewayProcess) logTail() string {
	b, _ := os.ReadFile(g.log.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stop ends the gateway: SIGTERM, then SIGKILL after a few seconds.
func (g *gatewayProcess) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
	g.log.Close()
}

// cpu is the CPU time the gateway has used.
func (g *gatewayProcess) cpu() (time.Duration, error) { return procCPU(g.cmd.Process.Pid) }

// cpuProfile writes a CPU profile of the gateway over the next d (in
// whole seconds, at least one) to file, from its admin listener.
func (g *gatewayProcess) cpuProfile(ctx context.Context, d time.Duration, file string) error {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", g.admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", g.build.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling %s: /debug/pprof/profile answered %s", g.build.Name, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profiling %s: %w", g.build.Name, err)
	}
	return f.Close()
}

// rss is the gateway's resident memory in bytes.
func (g *gatewayProcess) rss() (int64, error) { return procRSS(g.cmd.Process.Pid) }

// procCPU reads a process's user and system time from /proc/PID/stat, in
// clock ticks of 10 ms (USER_HZ is 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// utime and stime are fields 14 and 15; f[0] is field 3.
	if len(f) < 13 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procRSS reads VmRSS from /proc/PID/status.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// gatewayDialer connects the load generator to one listener of a gateway,
// or straight to the upstream.
type gatewayDialer struct {
	// Protocol is the scenario's name: "TLCP ECC_SM4_GCM_SM3", "TLS", or
	// "direct" (plain HTTP to the upstream).
	protocol string
	addr     string
	tlcp     *tlcp.Config
	tls      *tls.Config
}

// Gateway scenarios by the name the command line uses.
var gatewayProtocols = []string{"tlcp-gcm", "tlcp-cbc", "tls"}

func (g *gatewayProcess) dialer(protocol string) (gatewayDialer, error) {
	switch protocol {
	case "tlcp-gcm", "tlcp-cbc":
		suite, listener := tlcp.ECC_SM4_GCM_SM3, listenerGCM
		if protocol == "tlcp-cbc" {
			suite, listener = tlcp.ECC_SM4_CBC_SM3, listenerCBC
		}
		return gatewayDialer{
			protocol: "TLCP " + tlcp.CipherSuiteName(suite),
			addr:     g.addrs[listener],
			tlcp:     &tlcp.Config{InsecureSkipVerify: true, CipherSuites: []uint16{suite}},
		}, nil
	case "tls":
		return gatewayDialer{protocol: "TLS", addr: g.addrs[listenerTLS], tls: &tls.Config{InsecureSkipVerify: true}}, nil
	}
	return gatewayDialer{}, fmt.Errorf("unknown protocol %q (known: %s)", protocol, strings.Join(gatewayProtocols, ", "))
}

// checkProtocols refuses names dialer would not know.
func checkProtocols(ps []string) error {
	for _, p := range ps {
		if !slices.Contains(gatewayProtocols, p) {
			return fmt.Errorf("unknown protocol %q (known: %s)", p, strings.Join(gatewayProtocols, ", "))
		}
	}
	return nil
}

// dial connects and finishes the handshake.
func (d gatewayDialer) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	var sc interface {
		net.Conn
		HandshakeContext(context.Context) error
	}
	switch {
	case d.tlcp != nil:
		sc = tlcp.Client(c, d.tlcp)
	case d.tls != nil:
		sc = tls.Client(c, d.tls)
	default:
		return c, nil
	}
	if err := sc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return sc, nil
}

// Summary is the median of a figure over rounds, with the lowest and
// highest.
type Summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func summarizeRounds(vs []float64) Summary {
	if len(vs) == 0 {
		return Summary{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// String is "median (min-max)", or "median (min to max)" when a figure
// is negative.
func (s Summary) String() string {
	sep := "-"
	if s.Min < 0 {
		sep = " to "
	}
	return fmt.Sprintf("%s (%s%s%s)", signedNum(s.Median), signedNum(s.Min), sep, signedNum(s.Max))
}

// signedNum is num for figures that may be negative (differences).
func signedNum(v float64) string {
	if v < 0 {
		return "-" + num(-v)
	}
	return num(v)
}

// buildOrder is the order of the builds in round r: alternating, so that a
// drift of the machine does not always favour the same one.
func buildOrder(builds []GatewayBuild, r int) []GatewayBuild {
	order := slices.Clone(builds)
	if r%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

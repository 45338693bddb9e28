package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// record is what one connection did; times are offsets from the start of
// the scenario.
type record struct {
	end       time.Duration
	handshake time.Duration // connect + handshake, when hsOK
	total     time.Duration // connect to end of response, when reqOK
	hsOK      bool
	reqOK     bool
	resumed   bool
	errKind   string
	// negotiated describes what the handshake agreed on, when hsOK.
	negotiated string
}

// loadGen makes connections for one scenario.
type loadGen struct {
	sc      Scenario
	addr    string
	host    string
	timeout time.Duration
	dialer  net.Dialer
	request []byte
	start   time.Time
	pace    *pacer
	seq     atomic.Int64
	// ok and failed count connections so far, for the early stop.
	ok, failed atomic.Int64
	// client wraps a TCP connection; resume says whether it may offer a
	// cached session.
	client func(raw net.Conn, resume bool) handshaker
}

// deadAfter is how long a scenario runs while every attempt fails before
// it stops: the target is down, refuses, or speaks something else.
const deadAfter = time.Second

// errDead stops a scenario early.
var errDead = errors.New("every connection failed")

// scenario runs one scenario against addr and measures its window.
func (r *handshakeRun) scenario(ctx context.Context, sc Scenario, addr string, probe serverProbe, serverCores int) (*tally, error) {
	readCPU := probe.read
	opts := r.opts
	host, _, _ := net.SplitHostPort(addr)
	if opts.ServerName != "" {
		host = opts.ServerName
	}
	g := &loadGen{sc: sc, addr: addr, host: host, timeout: opts.Timeout, dialer: net.Dialer{Timeout: opts.Timeout, KeepAlive: -1}}
	if err := g.setClient(r.roots, r.clientCert, opts.ServerName); err != nil {
		return nil, err
	}
	if opts.HTTPPath != "" {
		g.request = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gmgate-bench\r\nConnection: close\r\n\r\n", opts.HTTPPath, host)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.start = time.Now()
	if opts.Rate > 0 {
		g.pace = newPacer(opts.Rate)
	}
	perWorker := make([][]record, opts.Concurrency)
	var wg sync.WaitGroup
	for i := range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			perWorker[i] = g.work(runCtx)
		}()
	}
	stopWorkers := func() {
		cancel()
		wg.Wait()
	}
	// Stop early when, a second in, nothing has succeeded and something
	// has failed.
	live, dead := context.WithCancelCause(ctx)
	defer dead(nil)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				if time.Since(g.start) >= deadAfter && g.ok.Load() == 0 && g.failed.Load() > 0 {
					dead(errDead)
					return
				}
			}
		}
	}()
	stoppedEarly := func() (*tally, error) {
		stopWorkers()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := r.newTally(sc, g, serverCores)
		t.stoppedEarly = true
		t.window = time.Since(g.start)
		t.count(perWorker, 0, t.window)
		r.progress(t)
		return t, nil
	}

	// The window opens after the warm-up and is bounded by the two CPU
	// readings; each reading's time is the middle of its round trip.
	if !sleepCtx(live, opts.Warmup) {
		return stoppedEarly()
	}
	if probe.windowStart != nil {
		if err := probe.windowStart(ctx); err != nil {
			stopWorkers()
			return nil, err
		}
	}
	cpu0, srv0, w0, err := readAt(ctx, readCPU, g.start)
	if err != nil {
		stopWorkers()
		return nil, err
	}
	load0 := loadCPU()
	if !sleepCtx(live, opts.Duration) {
		return stoppedEarly()
	}
	cpu1, srv1, w1, err := readAt(ctx, readCPU, g.start)
	load1 := loadCPU()
	if probe.windowEnd != nil && err == nil {
		err = probe.windowEnd(ctx)
	}
	stopWorkers()
	if err != nil {
		return nil, err
	}

	t := r.newTally(sc, g, serverCores)
	t.window = w1 - w0
	t.count(perWorker, w0, w1)
	if readCPU != nil {
		t.serverCPU = cpu1 - cpu0
		t.cpuKnown = true
		if srv0 >= 0 && srv1 >= 0 {
			t.serverHandshakes = srv1 - srv0
		}
	}
	t.loadCPU = load1 - load0
	t.rounds = []float64{t.perServerCPUSecond()}
	r.progress(t)
	return t, nil
}

func (r *handshakeRun) newTally(sc Scenario, g *loadGen, serverCores int) *tally {
	return &tally{scenario: sc, errors: map[string]int64{}, negotiated: map[string]int64{}, negotiatedResumed: map[string]int64{},
		serverCores: serverCores, loadCPUs: max(r.loadCPUs, 1), serverHandshakes: -1, request: g.request != nil}
}

// count adds the records that ended within [from, to).
func (t *tally) count(perWorker [][]record, from, to time.Duration) {
	for _, recs := range perWorker {
		for _, rec := range recs {
			if rec.end < from || rec.end >= to {
				continue
			}
			if rec.hsOK {
				t.handshakes = append(t.handshakes, rec.handshake)
				if rec.resumed {
					t.resumed++
					t.negotiatedResumed[rec.negotiated]++
				} else {
					t.negotiated[rec.negotiated]++
				}
			}
			if rec.reqOK {
				t.requests = append(t.requests, rec.total)
			}
			if rec.errKind != "" {
				t.errors[rec.errKind]++
			}
		}
	}
}

// progress reports a finished scenario.
func (r *handshakeRun) progress(t *tally) {
	if r.opts.Progress == nil {
		return
	}
	res := t.result()
	fmt.Fprintf(r.opts.Progress, "  %-36s %8.0f handshakes/s  p95 %7.2f ms  %8s per server CPU-second  %d errors",
		res.Name, res.HandshakesPerSec, res.Latency.P95Ms, num(res.HandshakesPerServerCPUSecond), res.ErrorCount)
	if t.stoppedEarly {
		fmt.Fprintf(r.opts.Progress, " (stopped: every connection of the first %s failed)", deadAfter)
	}
	fmt.Fprintln(r.opts.Progress)
}

// serverProbe is what the load generator can ask of the server: its CPU
// time (nil when unknown), and what to do as the window opens and closes.
type serverProbe struct {
	read                   cpuReader
	windowStart, windowEnd func(context.Context) error
}

// readAt reads the server's CPU (when it can be read) and returns the
// reading with its time as an offset from start.
func readAt(ctx context.Context, read cpuReader, start time.Time) (time.Duration, int64, time.Duration, error) {
	if read == nil {
		return 0, -1, time.Since(start), nil
	}
	before := time.Since(start)
	cpu, n, err := read(ctx)
	after := time.Since(start)
	return cpu, n, (before + after) / 2, err
}

// loadCPU is this process's CPU time so far, zero when unknown.
func loadCPU() time.Duration {
	u, s, err := processCPUTime()
	if err != nil {
		return 0
	}
	return u + s
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pacer spaces connection starts at least interval apart, whatever the
// workers do: a start that comes late does not let the next ones come
// early, so the rate is an upper bound over any stretch of time.
type pacer struct {
	interval time.Duration
	turn     chan struct{} // one token: whose turn it is to start
	last     time.Time     // the previous start, with the token
	// onStart, when set, sees each start time in order (for tests).
	onStart func(time.Time)
}

func newPacer(rate float64) *pacer {
	p := &pacer{interval: time.Duration(float64(time.Second) / rate), turn: make(chan struct{}, 1)}
	p.turn <- struct{}{}
	return p
}

// wait returns when the caller may start a connection, false when ctx
// ends first.
func (p *pacer) wait(ctx context.Context) bool {
	select {
	case <-p.turn:
	case <-ctx.Done():
		return false
	}
	defer func() { p.turn <- struct{}{} }()
	if !p.last.IsZero() && !sleepCtx(ctx, time.Until(p.last.Add(p.interval))) {
		return false
	}
	p.last = time.Now()
	if p.onStart != nil {
		p.onStart(p.last)
	}
	return true
}

// work makes connections one after the other until ctx is done.
func (g *loadGen) work(ctx context.Context) []record {
	var recs []record
	for ctx.Err() == nil {
		if g.pace != nil && !g.pace.wait(ctx) {
			break
		}
		i := g.seq.Add(1) - 1
		rec := g.one(ctx, resumeTurn(i, g.sc.ResumeRatio))
		if ctx.Err() != nil {
			// Cut short by the end of the run: neither a result nor an
			// error of the server's.
			break
		}
		if rec.hsOK {
			g.ok.Add(1)
		} else {
			g.failed.Add(1)
		}
		recs = append(recs, rec)
	}
	return recs
}

// resumeTurn spreads resumption attempts evenly: connection i offers a
// cached session when the running count of ratio*i steps up.
func resumeTurn(i int64, ratio float64) bool {
	switch {
	case ratio <= 0:
		return false
	case ratio >= 1:
		return true
	}
	return int64(float64(i+1)*ratio) > int64(float64(i)*ratio)
}

// one makes one connection: connect, handshake, optionally one HTTP
// request, then an orderly close that waits for the server's, so that the
// server has finished its side of the handshake before the next
// connection is counted.
func (g *loadGen) one(ctx context.Context, resume bool) (rec record) {
	defer func() { rec.end = time.Since(g.start) }()
	t0 := time.Now()
	raw, err := g.dialer.DialContext(ctx, "tcp", g.addr)
	if err != nil {
		rec.errKind = errorKind("connect", err)
		return rec
	}
	defer raw.Close()
	_ = raw.SetDeadline(t0.Add(g.timeout))
	c := g.client(raw, resume)
	if err := c.HandshakeContext(ctx); err != nil {
		rec.errKind = errorKind("handshake", err)
		return rec
	}
	rec.handshake = time.Since(t0)
	rec.hsOK = true
	rec.resumed = didResume(c)
	rec.negotiated = negotiated(c)
	if g.request != nil {
		if err := g.get(c); err != nil {
			rec.errKind = errorKind("request", err)
			return rec
		}
		rec.total = time.Since(t0)
		rec.reqOK = true
	}
	if err := c.CloseWrite(); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	return rec
}

// setTLS13SMClient prepares a TLS 1.3 ShangMi scenario's client. A
// ticket arrives after the handshake; the orderly close of one (which
// reads until the server's close) takes it in for the next.
func (g *loadGen) setTLS13SMClient(roots *certRoots, serverName string) {
	full := &tls13.Config{
		CipherSuites: []uint16{tls13.TLS_SM4_GCM_SM3}, CurvePreferences: g.sc.smGroups,
		ServerName: serverName, InsecureSkipVerify: roots == nil,
	}
	if roots != nil {
		full.RootCAs = roots.sm
		if serverName == "" {
			full.ServerName = g.host
		}
	}
	resumed := full.Clone()
	resumed.ClientSessionCache = tls13.NewLRUClientSessionCache(16)
	g.client = func(raw net.Conn, resume bool) handshaker {
		if resume {
			return tls13.Client(raw, resumed)
		}
		return tls13.Client(raw, full)
	}
}

// get sends the HTTP request and reads the whole response.
func (g *loadGen) get(c net.Conn) error {
	if _, err := c.Write(g.request); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// setClient prepares the client side of the scenario: one configuration
// that never resumes and one with a session cache shared by all workers.
func (g *loadGen) setClient(roots *certRoots, clientCert *tlcp.Certificate, serverName string) error {
	sc := g.sc
	if sc.Protocol == ProtoTLCP {
		full := &tlcp.Config{CipherSuites: []uint16{sc.tlcpSuite}, ServerName: serverName, InsecureSkipVerify: roots == nil}
		if roots != nil {
			full.RootCAs = roots.sm
			if serverName == "" {
				full.ServerName = g.host
			}
		}
		if sc.needsClientCert() {
			if clientCert == nil {
				return fmt.Errorf("%s needs a client encryption certificate", sc.Suite)
			}
			full.Certificates = []tlcp.Certificate{*clientCert}
		}
		resumed := full.Clone()
		resumed.ClientSessionCache = tlcp.NewLRUClientSessionCache(16, 0)
		g.client = func(raw net.Conn, resume bool) handshaker {
			if resume {
				return tlcp.Client(raw, resumed)
			}
			return tlcp.Client(raw, full)
		}
		return nil
	}
	if sc.Protocol == ProtoTLS13SM {
		g.setTLS13SMClient(roots, serverName)
		return nil
	}
	v := tlsVersion(sc.Protocol)
	full := &tls.Config{
		MinVersion: v, MaxVersion: v, CipherSuites: sc.tlsSuites, CurvePreferences: sc.curves,
		ServerName: serverName, InsecureSkipVerify: roots == nil,
	}
	if roots != nil {
		full.RootCAs = roots.std
		if serverName == "" {
			full.ServerName = g.host
		}
	}
	resumed := full.Clone()
	resumed.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	g.client = func(raw net.Conn, resume bool) handshaker {
		if resume {
			return tls.Client(raw, resumed)
		}
		return tls.Client(raw, full)
	}
	return nil
}

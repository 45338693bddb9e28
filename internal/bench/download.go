package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DownloadSchema names the layout of DownloadReport in JSON.
const DownloadSchema = "gmgate.bench.download/v1"

// DownloadOptions says what RunDownload does.
type DownloadOptions struct {
	GatewayOptions
	// Protocol is the gateway listener: tlcp-cbc (default), tlcp-gcm or
	// tls.
	Protocol string
	// Size of each download in bytes (DefaultDownloadSize when zero, at
	// most MaxDownloadSize).
	Size int64
}

// Sizes of a download.
const (
	DefaultDownloadSize = 256 << 20
	MaxDownloadSize     = maxUpstreamBody
)

// DownloadReport is the outcome of RunDownload.
type DownloadReport struct {
	GatewayReportHead
	Protocol string           `json:"protocol"`
	Size     int64            `json:"size"`
	Results  []DownloadResult `json:"results"`
}

// DownloadResult is one build over all rounds.
type DownloadResult struct {
	Build string `json:"build"`
	// MBPerSecond is the body's size over the time from sending the
	// request to its last byte, 10^6 bytes per second.
	MBPerSecond Summary `json:"mb_per_second"`
	// ServerCPUPerGB is the gateway's CPU time per 10^9 bytes, seconds.
	ServerCPUPerGB Summary `json:"server_cpu_seconds_per_gb"`
	// Ratio is MBPerSecond over the last build's in the same round (the
	// baseline), when there are two builds or more.
	Ratio  Summary         `json:"ratio,omitempty"`
	Rounds []DownloadRound `json:"rounds"`
}

// DownloadRound is one download.
type DownloadRound struct {
	Seconds          float64 `json:"seconds"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
}

func (o *DownloadOptions) defaults() error {
	if o.Protocol == "" {
		o.Protocol = "tlcp-cbc"
	}
	if err := checkProtocols([]string{o.Protocol}); err != nil {
		return err
	}
	if o.Size < 0 {
		return fmt.Errorf("a download of %d bytes", o.Size)
	}
	if o.Size == 0 {
		o.Size = DefaultDownloadSize
	}
	if o.Size > MaxDownloadSize {
		return fmt.Errorf("a download of %d bytes is more than the upstream serves", o.Size)
	}
	return nil
}

// RunDownload measures one large response through each build's gateway:
// every round downloads Size bytes from the upstream through each build
// in turn, on a new connection, and times it from the request to the last
// byte.
func RunDownload(ctx context.Context, opts DownloadOptions) (*DownloadReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	env, head, err := startRun(ctx, &opts.GatewayOptions, DownloadSchema, 1024)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &DownloadReport{GatewayReportHead: head, Size: opts.Size}
	gateways, err := env.startGateways(ctx, 100)
	defer gateways.stop()
	if err != nil {
		return nil, err
	}
	rounds := map[string][]DownloadRound{}
	for r := 0; r < opts.Rounds; r++ {
		for _, b := range buildOrder(opts.Builds, r) {
			g := gateways[b.Name]
			d, err := g.dialer(opts.Protocol)
			if err != nil {
				return nil, err
			}
			rep.Protocol = d.protocol
			res, err := download(ctx, d, g, opts.Size)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", b.Name, d.protocol, err)
			}
			rounds[b.Name] = append(rounds[b.Name], res)
			opts.progress("round %d/%d, %s: %.1f MB/s, %.2f s server CPU per GB", r+1, opts.Rounds, b.Name,
				float64(opts.Size)/res.Seconds/1e6, res.ServerCPUSeconds/float64(opts.Size)*1e9)
		}
	}
	last := rounds[opts.Builds[len(opts.Builds)-1].Name]
	for _, b := range opts.Builds {
		rs := rounds[b.Name]
		res := DownloadResult{Build: b.Name, Rounds: rs}
		var rate, cpu, ratio []float64
		for i, x := range rs {
			rate = append(rate, float64(opts.Size)/x.Seconds/1e6)
			cpu = append(cpu, x.ServerCPUSeconds/float64(opts.Size)*1e9)
			if len(opts.Builds) > 1 && i < len(last) {
				ratio = append(ratio, last[i].Seconds/x.Seconds)
			}
		}
		res.MBPerSecond, res.ServerCPUPerGB, res.Ratio = summarizeRounds(rate), summarizeRounds(cpu), summarizeRounds(ratio)
		rep.Results = append(rep.Results, res)
	}
	rep.end()
	return rep, nil
}

// download fetches size bytes on a new connection.
func download(ctx context.Context, d gatewayDialer, g *gatewayProcess, size int64) (DownloadRound, error) {
	clients, err := dialClients(ctx, d, 1, sizeQuery(size), 64<<10, nil)
	if err != nil {
		return DownloadRound{}, err
	}
	defer closeClients(clients)
	c := clients[0]
	cpu0, err := g.cpu()
	if err != nil {
		return DownloadRound{}, err
	}
	start := time.Now()
	if _, err := c.conn.Write(c.request); err != nil {
		return DownloadRound{}, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return DownloadRound{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return DownloadRound{}, fmt.Errorf("status %s", resp.Status)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()
	// Read in large pieces, as a client that stores the body would.
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := resp.Body.Read(buf)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return DownloadRound{}, err
		}
	}
	elapsed := time.Since(start)
	if n != size {
		return DownloadRound{}, errors.New("short body")
	}
	cpu1, err := g.cpu()
	if err != nil {
		return DownloadRound{}, err
	}
	return DownloadRound{Seconds: elapsed.Seconds(), ServerCPUSeconds: (cpu1 - cpu0).Seconds()}, nil
}

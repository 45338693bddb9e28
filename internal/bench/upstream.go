package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"
)

// upstreamConfig is what the parent tells the upstream child.
type upstreamConfig struct {
	// Body is the size of a response without ?size=.
	Body int `json:"body"`
	// CPUs the child binds itself to; none leaves it unbound.
	CPUs []int `json:"cpus,omitempty"`
}

// upstreamReady is the upstream child's first line on stdout.
type upstreamReady struct {
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxUpstreamBody bounds ?size=.
const maxUpstreamBody = 1 << 40

// UpstreamChild runs the upstream HTTP server of the gateway benchmarks in
// a child process: it answers every request with a body of ?size=N bytes
// (the configured size without it), keeps connections alive, says its
// loopback address on out as JSON, and exits when control reaches EOF.
func UpstreamChild(ctx context.Context, configJSON string, control io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	fail := func(err error) error {
		_ = enc.Encode(upstreamReady{Error: err.Error()})
		return err
	}
	var cfg upstreamConfig
	if err := json.Unmarshal([]byte(configJSON), &cfg); err != nil {
		return fail(fmt.Errorf("bad upstream configuration: %w", err))
	}
	if len(cfg.CPUs) > 0 {
		if err := pinProcess(cfg.CPUs); err != nil {
			return fail(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: upstreamHandler(cfg.Body), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if err := enc.Encode(upstreamReady{Addr: ln.Addr().String()}); err != nil {
		return err
	}
	// Run until the parent closes our input (or goes away).
	_, _ = io.Copy(io.Discard, control)
	return nil
}

// upstreamHandler answers with size bytes of a fixed pattern.
func upstreamHandler(body int) http.Handler {
	pattern := make([]byte, 256<<10)
	for i := range pattern {
		pattern[i] = byte('a' + i%26)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size := int64(body)
		if q := r.URL.Query().Get("size"); q != "" {
			n, err := strconv.ParseInt(q, 10, 64)
			if err != nil || n < 0 || n > maxUpstreamBody {
				http.Error(w, "bad size", http.StatusBadRequest)
				return
			}
			size = n
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for size > 0 {
			n := min(size, int64(len(pattern)))
			if _, err := w.Write(pattern[:n]); err != nil {
				return
			}
			size -= n
		}
	})
}

// upstreamProcess is the running upstream child.
type upstreamProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	done  chan struct{}
}

func startUpstream(ctx context.Context, command GatewayCommand, cfg upstreamConfig) (*upstreamProcess, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &upstreamProcess{cmd: command("bench", "upstream-child", string(js)), done: make(chan struct{})}
	stderr := &limitedBuffer{max: 4096}
	p.cmd.Stderr = stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the upstream server: %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	var ready upstreamReady
	select {
	case line, ok := <-lines:
		if !ok {
			<-p.done
			return nil, fmt.Errorf("the upstream server exited: %s", stderr.String())
		}
		if err := json.Unmarshal([]byte(line), &ready); err != nil {
			p.stop()
			return nil, fmt.Errorf("the upstream server said %q: %w", line, err)
		}
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, errors.New("the upstream server did not start within 30s")
	}
	if ready.Error != "" || ready.Addr == "" {
		p.stop()
		return nil, fmt.Errorf("the upstream server: %s", ready.Error)
	}
	p.addr = ready.Addr
	return p, nil
}

// stop closes the child's input, which ends it, and kills it if it lingers.
func (p *upstreamProcess) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// directDialer connects straight to the upstream, in plain HTTP.
func (p *upstreamProcess) directDialer() gatewayDialer {
	return gatewayDialer{protocol: "direct", addr: p.addr}
}

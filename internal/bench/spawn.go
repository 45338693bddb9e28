package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Launcher makes the command that runs ServeChild with configJSON in a new
// process. The gmgate command re-executes itself with a hidden subcommand.
type Launcher func(configJSON string) (*exec.Cmd, error)

// SelfLauncher runs this executable with args followed by the
// configuration, e.g. SelfLauncher("bench", "serve-child").
func SelfLauncher(args ...string) Launcher {
	return func(configJSON string) (*exec.Cmd, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable to start the server: %w", err)
		}
		return exec.Command(exe, append(append([]string{}, args...), configJSON)...), nil
	}
}

// BinaryLauncher runs the executable at path with args followed by the
// configuration: another gmgate build, for a baseline.
func BinaryLauncher(path string, args ...string) Launcher {
	return func(configJSON string) (*exec.Cmd, error) {
		return exec.Command(path, append(append([]string{}, args...), configJSON)...), nil
	}
}

// childProcess is a running server child seen from the parent.
type childProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *limitedBuffer
	ready  childReady
	done   chan struct{}
	err    error // set when done closes
	mu     sync.Mutex
}

// startChild starts the server child and waits until it listens.
func startChild(ctx context.Context, launch Launcher, cfg childConfig) (*childProcess, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd, err := launch(string(js))
	if err != nil {
		return nil, err
	}
	p := &childProcess{cmd: cmd, lines: make(chan string, 4), stderr: &limitedBuffer{max: 8192}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		// Wait closes stdout, so it comes after the last read.
		p.err = cmd.Wait()
		close(p.done)
	}()
	line, err := p.next(ctx, 60*time.Second)
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("server process did not start: %w", err)
	}
	if err := json.Unmarshal([]byte(line), &p.ready); err != nil {
		p.stop()
		return nil, fmt.Errorf("server process said %q: %w", line, err)
	}
	if p.ready.Error != "" {
		p.stop()
		return nil, fmt.Errorf("server process: %s", p.ready.Error)
	}
	if p.ready.Addr == "" {
		p.stop()
		return nil, errors.New("server process gave no address")
	}
	return p, nil
}

// next returns the child's next line of output.
func (p *childProcess) next(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.done
			return "", p.exitError()
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", fmt.Errorf("no answer within %s", timeout)
	}
}

func (p *childProcess) exitError() error {
	msg := strings.TrimSpace(p.stderr.String())
	if p.err == nil {
		p.err = errors.New("exited")
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", p.err, msg)
	}
	return p.err
}

// stats asks the child for its CPU time and counters.
func (p *childProcess) stats(ctx context.Context) (childStats, error) {
	return p.command(ctx, "stats")
}

// command sends one control command and reads the answer.
func (p *childProcess) command(ctx context.Context, cmd string) (childStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return childStats{}, fmt.Errorf("server process: %w", err)
	}
	line, err := p.next(ctx, 10*time.Second)
	if err != nil {
		return childStats{}, fmt.Errorf("server process: %w", err)
	}
	var st childStats
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		return childStats{}, fmt.Errorf("server process said %q: %w", line, err)
	}
	if st.Error != "" {
		return st, fmt.Errorf("server process: %s: %s", cmd, st.Error)
	}
	return st, nil
}

// stop closes the child's control input, which makes it shut down, and
// kills it if it has not exited in a few seconds.
func (p *childProcess) stop() {
	p.stdin.Close()
	kill := time.NewTimer(5 * time.Second)
	defer kill.Stop()
	for lines := p.lines; lines != nil; {
		select {
		case _, ok := <-lines:
			if !ok {
				lines = nil
			}
		case <-kill.C:
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

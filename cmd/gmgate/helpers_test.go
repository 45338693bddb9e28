package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testlog"
)

// served is a `gmgate serve` process started by a test.
type served struct {
	cmd *exec.Cmd
	// addrs are the bound addresses by listener name, admin the admin
	// listener's.
	addrs map[string]string
	admin string
	// logs is the process log (stderr) so far.
	logs *testlog.Buffer
	// exited is closed when the process has exited; err is its result.
	exited chan struct{}
	err    error
}

// startServe starts cmd (a gmgate serve command) and waits until it
// reports each of the named listeners bound. It fails the test when the
// process exits first; it kills the process when the test ends.
func startServe(t testing.TB, cmd *exec.Cmd, listeners ...string) *served {
	t.Helper()
	s := &served{cmd: cmd, addrs: map[string]string{}, logs: &testlog.Buffer{}, exited: make(chan struct{})}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.exited
	})
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.logs.Write(append(sc.Bytes(), '\n'))
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				select {
				case lines <- line:
				default:
				}
			}
		}
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.After(30 * time.Second)
	for len(s.addrs) < len(listeners) || s.admin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				<-s.exited
				t.Fatalf("gmgate serve exited (%v) before it served:\n%s", s.err, s.logs)
			}
			switch line["msg"] {
			case "listening":
				s.addrs[line["listener"].(string)] = line["addr"].(string)
			case "gmgate started":
				s.admin, _ = line["admin"].(string)
			}
		case <-deadline:
			t.Fatalf("gmgate serve did not report %v bound:\n%s", listeners, s.logs)
		}
	}
	// Keep draining the log after the start.
	go func() {
		for range lines {
		}
	}()
	return s
}

// waitLog waits until the process log contains text.
func (s *served) waitLog(t testing.TB, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", text, s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *served) port(t *testing.T, listener string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(s.addrs[listener])
	if err != nil {
		t.Fatalf("listener %s: %v", listener, err)
	}
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}

// localPKI writes a new SM2 CA to dir (ca.crt, ca.key) and issues a pair
// for localhost and 127.0.0.1.
func localPKI(t *testing.T, dir string) (*pki.CA, *pki.Dual) {
	t.Helper()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	return ca, pair
}

// writeDualPair writes a local SM2 CA (see localPKI) and a dual
// certificate for localhost into dir.
func writeDualPair(t *testing.T, dir string) pki.DualFiles {
	t.Helper()
	_, pair := localPKI(t, dir)
	files, err := pair.Write(dir, "localhost", nil)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

package demo

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/probe"
	"github.com/gmgate/gmgate/proxy"
	"github.com/gmgate/gmgate/tlcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The demo as a user runs it: start, follow the printed probe command,
// stop; then start again and find the certificates reused.
func TestDemoRunAndProbe(t *testing.T) {
	dir := t.TempDir()
	for round, wantMade := range []string{"created", "reused"} {
		ctx, cancel := context.WithCancel(context.Background())
		var out bytes.Buffer
		started := make(chan *proxy.Server, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{StateDir: dir, Out: &out, Logger: quiet, AccessLog: quiet, Started: func(s *proxy.Server) { started <- s }, ProbeCommand: "gmgate"})
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("demo did not start: %v", err)
		}
		mm := regexp.MustCompile(`gmgate probe --ca (\S+) (https://\S+)`).FindStringSubmatch(out.String())
		if mm == nil {
			t.Fatalf("no probe command printed:\n%s", out.String())
		}
		args := mm[1:]
		res, err := probe.Run(context.Background(), probe.Options{CAFile: args[0], URL: args[1], Resume: true}, nil)
		if err != nil {
			t.Fatalf("round %d: probe: %v", round, err)
		}
		if res.Status != http.StatusOK || !strings.Contains(string(res.Body), "through gmgate with tlcp ("+tlcp.CipherSuiteName(tlcp.DefaultCipherSuites[0])+")") {
			t.Errorf("round %d: %d %s", round, res.Status, res.Body)
		}
		if !res.Resumed() {
			t.Errorf("round %d: second connection did not resume", round)
		}
		if len(res.State.PeerCertificates) < 2 || len(res.State.VerifiedChains) == 0 {
			t.Errorf("round %d: certificates %d, chains %d", round, len(res.State.PeerCertificates), len(res.State.VerifiedChains))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Certificates ("+wantMade+")") || !strings.Contains(out.String(), "/metrics") {
			t.Errorf("round %d output:\n%s", round, out.String())
		}
	}
}

func TestUpstreamURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080",
		"127.0.0.1:8080":        "http://127.0.0.1:8080",
		":8080":                 "http://127.0.0.1:8080",
		"https://svc.internal/": "https://svc.internal",
		"localhost:3000":        "http://localhost:3000",
	} {
		if got, err := UpstreamURL(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"tcp://127.0.0.1:5432", "http://u:p@127.0.0.1:1", "http://127.0.0.1:1/path", "ftp://x:1"} {
		if _, err := UpstreamURL(bad); err == nil || !strings.Contains(err.Error(), "--upstream") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The file --upstream writes may be written anew while it is as written;
// once edited, or when someone else wrote it, it is the user's.
func TestConfigFileEditedIsKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ConfigFile)
	if err := checkConfigUnedited(path); err != nil {
		t.Fatalf("no file yet: %v", err)
	}
	st, err := Prepare(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.UpstreamConfig("127.0.0.1:8443", "127.0.0.1:9180", "http://127.0.0.1:8080")
	if _, err := writeConfig(dir, cfg, "http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	if err := checkConfigUnedited(path); err != nil {
		t.Errorf("as written: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, edited := range [][]byte{
		bytes.Replace(data, []byte("127.0.0.1:8080"), []byte("127.0.0.1:9090"), 1),
		append(bytes.Clone(data), "# mine\n"...),
		[]byte("listeners: []\n"),
	} {
		if err := os.WriteFile(path, edited, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := checkConfigUnedited(path); err == nil || !strings.Contains(err.Error(), "gmgate serve -c "+path) {
			t.Errorf("edited file %q: %v", edited[:min(len(edited), 40)], err)
		}
	}
}

// An admin listener off loopback (--admin 0.0.0.0:9180 in a container)
// gets a token made once in the state directory, which makes the
// configuration one that serve accepts.
func TestAdminTokenOffLoopback(t *testing.T) {
	st, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f, err := st.adminToken("127.0.0.1:9180"); err != nil || f != "" {
		t.Fatalf("loopback: %q %v", f, err)
	}
	cfg := st.Config("127.0.0.1:0", "0.0.0.0:9180", "http://127.0.0.1:1")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Fatalf("off loopback without a token: %v", err)
	}
	f, err := st.adminToken("0.0.0.0:9180")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f)
	if err != nil || len(strings.TrimSpace(string(data))) != 64 {
		t.Fatalf("token file %s: %v %d bytes", f, err, len(data))
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	if again, _ := st.adminToken("[::]:9180"); again != f {
		t.Errorf("a second run made another token file: %s", again)
	}
	if data2, _ := os.ReadFile(f); string(data2) != string(data) {
		t.Error("a second run changed the token")
	}
	cfg.Admin.TokenFile = f
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with the token: %v", err)
	}
}

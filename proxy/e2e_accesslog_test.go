package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
)

// TestCutResponseIsLogged: a request whose response is cut off midway
// (the client went away during a download, or the upstream broke off
// its body) still gets its access log line, with what was sent: such
// requests are what an operator looks for in the log.
func TestCutResponseIsLogged(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			// A length it does not keep to.
			w.Header().Set("Content-Length", "100000")
			_, _ = w.Write(bytes.Repeat([]byte("x"), 1000))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	var access testlog.Buffer
	s := startServer(t, testConfig(p, up.URL), slog.New(slog.NewJSONHandler(&access, nil)))

	for _, path := range []string{"/download", "/broken"} {
		c := dialTLCP(t, p, s)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path)
		if path == "/download" {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.CopyN(io.Discard, resp.Body, 500)
			c.Close() // gone midway
		} else {
			// The connection is closed on the client.
			_, _ = io.Copy(io.Discard, c)
		}
		testwait.For(t, "the access log line of GET "+path, func() bool {
			for _, l := range jsonLines(t, access.String(), "request") {
				if l["path"] == path {
					return true
				}
			}
			return false
		})
	}
	for _, l := range jsonLines(t, access.String(), "request") {
		if l["path"] == "/download" && (l["status"] != float64(200) || l["bytes"].(float64) < 500) {
			t.Errorf("access log line of a download cut off by its client: %v", l)
		}
	}
}

// Each way log.access cannot be opened gets the fix for that way.
func TestAccessLogProblemFix(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, access, msg, fix string
	}{
		{"directory", dir, "is a directory", "name a file in it, such as " + filepath.Join(dir, "access.log")},
		{"missing directory", filepath.Join(dir, "missing", "access.log"), "no such file or directory", "create the directory " + filepath.Join(dir, "missing") + " writable by the user gmgate runs as, or log to stdout"},
		{"file as directory", filepath.Join(file, "access.log"), "not a directory", file + " is a file, not a directory: choose a path in a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(p, "http://127.0.0.1:1")
			cfg.Log.Access = c.access
			_, err := Check(cfg, CheckOptions{})
			var ce *config.Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("Check = %v, want one problem", err)
			}
			got := ce.Problems[0]
			if got.Path != "log.access" || !strings.Contains(got.Msg, c.msg) || !strings.HasPrefix(got.Fix, c.fix) {
				t.Errorf("problem %q (%q, fix %q), want log.access with %q, fix %q", got.Path, got.Msg, got.Fix, c.msg, c.fix)
			}
		})
	}
}

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

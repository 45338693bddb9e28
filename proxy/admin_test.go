package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testwait"
)

// TestAdminPprof runs a gateway from a configuration file as gmgate serve
// does: without admin.pprof the admin listener has no profiles; with it
// (here turned on by editing the file) it serves net/http/pprof, and the
// data plane never does.
func TestAdminPprof(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	file := tempDir(t) + "/gmgate.yaml"
	write := func(admin string) {
		t.Helper()
		replaceFile(t, file, edgeConfig(p, admin, up.URL))
	}
	write(`{listen: "127.0.0.1:0"}`)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *Server, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, file, nil, Options{Logger: testLogger(t), Started: func(s *Server) { started <- s }})
	}()
	s := <-started
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	admin := "http://" + s.AdminAddr().String()
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}

	// Off by default.
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Fatalf("admin.pprof off: %s answered %d", path, code)
		}
	}

	write(`{listen: "127.0.0.1:0", pprof: true}`)
	testwait.For(t, "admin.pprof to be turned on by the file change", func() bool {
		code, _ := get("/debug/pprof/")
		return code == http.StatusOK
	})
	if code, body := get("/debug/pprof/"); code != http.StatusOK || !strings.Contains(string(body), "goroutine") || !strings.Contains(string(body), "heap") {
		t.Fatalf("index: %d %.200s", code, body)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("goroutine profile: %d %.200s", code, body)
	}
	// A CPU profile is gzipped protobuf.
	if code, body := get("/debug/pprof/profile?seconds=1"); code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Fatalf("CPU profile: %d %.40q", code, body)
	}
	// The data plane passes the path to the upstream like any other.
	resp, err := tlcpClient(t, p, nil).Get(gatewayURL(s, "/debug/pprof/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.Header.Get("X-Upstream") != "app" {
		t.Fatalf("the data plane answered /debug/pprof/ itself: %d", resp.StatusCode)
	}

	write(`{listen: "127.0.0.1:0", pprof: false}`)
	testwait.For(t, "admin.pprof to be turned off again", func() bool {
		code, _ := get("/debug/pprof/")
		return code == http.StatusNotFound
	})
}

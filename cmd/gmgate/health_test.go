package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gmgate health asks a running gateway's admin listener, by address or
// through the configuration's admin.listen, and exits 0 while it is
// ready, 1 once it is gone.
func TestHealth(t *testing.T) {
	p := newCheckPKI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(configYAML("127.0.0.1:0", p.listener("edge", "127.0.0.1:0"))), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, gmgateCommand("serve", "-c", file), "edge")

	out, code := runGmgate(t, nil, "health", "--admin", srv.admin)
	if code != 0 || strings.TrimSpace(out) != "ready" {
		t.Errorf("health --admin %s: exit %d, %q; want 0 and ready", srv.admin, code, out)
	}
	out, code = runGmgate(t, nil, "health", "--admin", srv.admin, "--live")
	if code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("health --live: exit %d, %q; want 0 and ok", code, out)
	}
	// The address from a configuration file's admin.listen.
	byFile := filepath.Join(dir, "by-file.yaml")
	if err := os.WriteFile(byFile, []byte(configYAML(srv.admin, p.listener("edge", "127.0.0.1:0"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code = runGmgate(t, nil, "health", "-c", byFile); code != 0 || strings.TrimSpace(out) != "ready" {
		t.Errorf("health -c: exit %d, %q", code, out)
	}

	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	out, code = runGmgate(t, nil, "health", "--admin", srv.admin)
	if code != 1 || !strings.Contains(out, "cannot reach gmgate's admin listener at "+srv.admin) {
		t.Errorf("health of a stopped gateway: exit %d, want 1 and what it tried:\n%s", code, out)
	}
	off := filepath.Join(dir, "off.yaml")
	if err := os.WriteFile(off, []byte(configYAML("off", p.listener("edge", "127.0.0.1:0"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code = runGmgate(t, nil, "health", "-c", off); code != 1 || !strings.Contains(out, `admin.listen is "off"`) {
		t.Errorf("health -c with admin off: exit %d\n%s", code, out)
	}
}

// A draining gateway answers /readyz 503, which health reports with what
// it said.
func TestAskAdminNotReady(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("draining\n"))
	}))
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	_, err := askAdmin(context.Background(), addr, "/readyz")
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: draining") {
		t.Errorf("askAdmin of a draining gateway: %v", err)
	}
}

func TestAdminDialAddr(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:9180": "127.0.0.1:9180",
		"0.0.0.0:9180":   "127.0.0.1:9180",
		":9180":          "127.0.0.1:9180",
		"[::]:9180":      "[::1]:9180",
		"10.0.0.5:9180":  "10.0.0.5:9180",
	} {
		if got, err := adminDialAddr(listen); err != nil || got != want {
			t.Errorf("adminDialAddr(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
	if _, err := adminDialAddr("off"); err == nil {
		t.Error(`adminDialAddr("off") succeeded`)
	}
}

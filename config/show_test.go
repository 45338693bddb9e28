package config

import (
	"reflect"
	"strings"
	"testing"
)

// config show leaves unset optional keys out instead of printing null and
// empty values, and what it prints reads back to the same configuration.
func TestShowLeavesOutUnsetKeys(t *testing.T) {
	cfg, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Show(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, unset := range []string{"null", `""`, "[]", "{}", "resumed:", "client_fingerprint:"} {
		if strings.Contains(text, unset) {
			t.Errorf("show prints %q:\n%s", unset, text)
		}
	}
	for _, set := range []string{"client_subject: X-Client-Subject", "required: false", "max_fails: 3", "retries: 1", `min_version: "1.2"`} {
		if !strings.Contains(text, set) {
			t.Errorf("show lacks %q:\n%s", set, text)
		}
	}
	again, err := Parse("shown.yaml", out)
	if err != nil {
		t.Fatalf("shown configuration does not parse:\n%s\n%v", out, err)
	}
	// The same configuration, suites explicit now (where each was read
	// from aside).
	cfg.File, again.File = "", ""
	cfg.idx, again.idx = nil, nil
	for i := range cfg.Listeners {
		if cfg.Listeners[i].TLCP != nil {
			cfg.Listeners[i].TLCP.SuitesDefaulted = false
			again.Listeners[i].TLCP.SuitesDefaulted = false
		}
	}
	if !reflect.DeepEqual(cfg, again) {
		t.Errorf("read back differently:\n%+v\n%+v", cfg, again)
	}
}

// ShowSet writes only what a configuration built in code sets.
func TestShowSet(t *testing.T) {
	zero := 0
	c := &Config{
		Admin: Admin{Listen: "127.0.0.1:9180"},
		Listeners: []Listener{{Name: "edge", Listen: "127.0.0.1:8443", TLS: &TLS{Cert: "/c.crt", Key: "/c.key"},
			Routes: []Route{{Upstream: "app"}}}},
		Upstreams: map[string]*Upstream{"app": {Targets: []string{"http://127.0.0.1:8080"}, Retries: &zero}},
	}
	out, err := ShowSet(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `admin:
  listen: 127.0.0.1:9180
listeners:
  - name: edge
    listen: 127.0.0.1:8443
    tls:
      cert: /c.crt
      key: /c.key
    routes:
      - upstream: app
upstreams:
  app:
    targets:
      - http://127.0.0.1:8080
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := Parse("set.yaml", out); err != nil {
		t.Errorf("does not parse: %v", err)
	}
}

// showParses checks that what Show prints of cfg parses again.
func showParses(t *testing.T, cfg *Config) {
	t.Helper()
	out, err := Show(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("shown.yaml", out); err != nil {
		t.Fatalf("shown configuration does not parse:\n%s\n%v", out, err)
	}
}

package config

import (
	"errors"
	"strings"
	"testing"
)

const gmCapableYAML = `listeners:
  - name: edge
    listen: ":443"
    sites:
      - name: gm
        hosts: [gm.example.cn]
        default: true
        tlcp: {sign_cert: a.sign.crt, sign_key: a.sign.key, enc_cert: a.enc.crt, enc_key: a.enc.key}
        tls: {cert: a.crt, key: a.key}
        routes: [{upstream: app}]
      - name: tlsgm
        hosts: [tls.example.cn]
        tlcp: {sign_cert: a.sign.crt, sign_key: a.sign.key, enc_cert: a.enc.crt, enc_key: a.enc.key}
        tls: {cert: a.crt, key: a.key}
        gm_capable_tls_clients: tls
        routes: [{upstream: app}]
      - name: www
        hosts: [www.example.cn]
        tls: {cert: a.crt, key: a.key}
        gm_capable_tls_clients: tlcp
        routes: [{upstream: app}]
  - name: flat
    listen: ":8443"
    tlcp: {sign_cert: a.sign.crt, sign_key: a.sign.key, enc_cert: a.enc.crt, enc_key: a.enc.key}
    routes: [{upstream: app}]
  - name: web
    listen: ":9443"
    tls: {cert: a.crt, key: a.key}
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://10.0.0.5:8080"]}
`

// gm_capable_tls_clients defaults to tlcp where a site serves TLCP, stays
// as written elsewhere, and a setting that cannot take effect is warned
// about at its line.
func TestGMCapableDefaultsAndWarnings(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(gmCapableYAML))
	if err != nil {
		t.Fatal(err)
	}
	sites := cfg.Listeners[0].SiteList()
	for i, want := range []string{GMCapableTLCP, GMCapableTLS, GMCapableTLCP} {
		if got := sites[i].GMCapableTLSClients; got != want {
			t.Errorf("site %s: %q, want %q", sites[i].Name, got, want)
		}
	}
	if got := cfg.Listeners[1].SiteList()[0].GMCapableTLSClients; got != GMCapableTLCP {
		t.Errorf("flat tlcp listener: %q, want the default tlcp", got)
	}
	warns := GMCapableWarnings(cfg)
	want := []struct {
		line int
		text string
	}{
		{20, "listeners[0].sites[2].gm_capable_tls_clients: has no effect: the site has no tlcp section"},
		{29, "listeners[2].gm_capable_tls_clients: has no effect: a tls listener speaks no TLCP"},
	}
	if len(warns) != len(want) {
		t.Fatalf("warnings %v, want %d", warns, len(want))
	}
	for i, w := range want {
		p := warns[i]
		if p.File != "x.yaml" || p.Line != w.line || !strings.Contains(p.String(), w.text) || p.Fix == "" {
			t.Errorf("warning %d = %q (line %d), want line %d with %q and a fix", i, p.String(), p.Line, w.line, w.text)
		}
	}
	// Nothing to warn about where the setting is only the default.
	cfg, err = Parse("x.yaml", []byte(sitesYAML))
	if err != nil {
		t.Fatal(err)
	}
	if w := GMCapableWarnings(cfg); len(w) != 0 {
		t.Errorf("defaults warned about: %v", w)
	}
	if got := cfg.Listeners[0].SiteList()[1].GMCapableTLSClients; got != "" {
		t.Errorf("a TLS-only site got %q", got)
	}
}

// A wrong value, the key on a listener with sites, and the key on a
// listener that makes no handshakes are problems with their line and fix.
func TestGMCapableProblems(t *testing.T) {
	doc := `listeners:
  - name: edge
    listen: ":443"
    gm_capable_tls_clients: tlcp
    sites:
      - name: gm
        default: true
        tlcp: {sign_cert: a.sign.crt, sign_key: a.sign.key, enc_cert: a.enc.crt, enc_key: a.enc.key}
        gm_capable_tls_clients: TLCP
        routes: [{upstream: app}]
  - name: local
    listen: "127.0.0.1:80"
    protocol: http
    gm_capable_tls_clients: tls
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://10.0.0.5:8080"]}
`
	_, err := Parse("x.yaml", []byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	want := []struct {
		line int
		text string
	}{
		{4, "listeners[0].gm_capable_tls_clients: a listener with sites keeps its gm_capable_tls_clients in each site"},
		{9, `listeners[0].sites[0].gm_capable_tls_clients: unknown value "TLCP"`},
		{14, "listeners[1].gm_capable_tls_clients: an http listener makes no TLCP or TLS handshakes"},
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		p := ce.Problems[i]
		if p.File != "x.yaml" || p.Line != w.line || !strings.Contains(p.String(), w.text) || p.Fix == "" {
			t.Errorf("problem %d = %q (line %d), want line %d with %q and a fix", i, p.String(), p.Line, w.line, w.text)
		}
	}
}

// A configuration built in code keeps the default of the protocol a
// listener had before it was changed: that is not a setting to refuse.
func TestGMCapableDefaultOfAnotherProtocol(t *testing.T) {
	c := &Config{
		Listeners: []Listener{{Name: "edge", Listen: "127.0.0.1:0", TLCP: &TLCP{SignCert: "s.crt", SignKey: "s.key", EncCert: "e.crt", EncKey: "e.key"}, Routes: []Route{{Upstream: "app"}}}},
		Upstreams: map[string]*Upstream{"app": {Targets: []string{"http://127.0.0.1:8080"}}},
	}
	Defaults(c)
	if c.Listeners[0].GMCapableTLSClients != GMCapableTLCP {
		t.Fatalf("default %q", c.Listeners[0].GMCapableTLSClients)
	}
	c.Listeners[0].Protocol, c.Listeners[0].TLCP, c.Listeners[0].HTTP2 = ProtocolHTTP, nil, nil
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := GMCapableWarnings(c); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
}

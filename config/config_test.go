package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gmgate/gmgate/tlcp"
)

func TestLoadGood(t *testing.T) {
	cfg, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfg.Listeners); got != 2 {
		t.Fatalf("listeners = %d, want 2", got)
	}
	edge := cfg.Listeners[0]
	if edge.Protocol != ProtocolAuto || edge.TLS.MinVersion != "1.2" || edge.TLCP.ClientAuth != "none" {
		t.Errorf("edge defaults not applied: %+v %+v", edge.TLS, edge.TLCP)
	}
	if edge.Routes[1].Path != "/" {
		t.Errorf("route path default = %q, want /", edge.Routes[1].Path)
	}
	db := cfg.Listeners[1]
	if db.Protocol != ProtocolTLCP || len(db.TLCP.Suites) != 4 {
		t.Errorf("db listener defaults: protocol %q suites %v", db.Protocol, db.TLCP.Suites)
	}
	// Session cache: the defaults, or off with size 0 (and the default
	// lifetime, unused).
	if sc := edge.TLCP.SessionCache; *sc.Size != tlcp.DefaultSessionCacheSize || sc.Lifetime.D() != tlcp.DefaultSessionLifetime {
		t.Errorf("edge session cache defaults: %d, %s", *sc.Size, sc.Lifetime)
	}
	if sc := db.TLCP.SessionCache; *sc.Size != 0 || sc.Lifetime.D() != tlcp.DefaultSessionLifetime {
		t.Errorf("db session cache: %d, %s", *sc.Size, sc.Lifetime)
	}
	if edge.TLCP.AcceptServerAuthClientCerts || !db.TLCP.AcceptServerAuthClientCerts {
		t.Errorf("accept_server_auth_client_certs: edge %v, db %v", edge.TLCP.AcceptServerAuthClientCerts, db.TLCP.AcceptServerAuthClientCerts)
	}
	// A listener that names a client identity header gets client_verified
	// too; one that names none does not.
	if edge.SessionHeaders.ClientVerified != DefaultClientVerifiedHeader || db.SessionHeaders.ClientVerified != "" {
		t.Errorf("client_verified: edge %q, db %q", edge.SessionHeaders.ClientVerified, db.SessionHeaders.ClientVerified)
	}
	up := cfg.Upstreams["legacy-api"]
	if up.Policy != PolicyLeastConn || up.Health.Interval.D() != 5*time.Second || up.Health.Timeout.D() != DefaultHealthTimeout {
		t.Errorf("upstream: %+v", up)
	}
	if *up.Retries != DefaultRetries || *up.Passive.MaxFails != DefaultPassiveMaxFails {
		t.Errorf("upstream retries/max_fails defaults not applied")
	}
	if cfg.Upstreams["db"].Scheme() != "tcp" {
		t.Errorf("db scheme = %q", cfg.Upstreams["db"].Scheme())
	}
	if cfg.Limits.MaxHandshakes != 512 || cfg.Timeouts.Idle.D() != DefaultIdle || cfg.Admin.Listen != "127.0.0.1:9180" {
		t.Errorf("limits/timeouts: %+v %+v", cfg.Limits, cfg.Timeouts)
	}
}

// The acceptance case: three mistakes, three problems, each with
// its line and field path, and no configuration returned.
func TestThreeMistakes(t *testing.T) {
	cfg, err := Load("testdata/three-mistakes.yaml")
	if cfg != nil {
		t.Fatal("a configuration with problems was returned")
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	want := []struct {
		line int
		path string
		msg  string
	}{
		{10, "listeners[0].tlcp.cipher_suites", `unknown field "cipher_suites"`},
		{13, "listeners[0].routes[0].upstream", `no upstream is called "legacy"`},
		{18, "upstreams.legacy-api.health.interval", `"five seconds" is not a duration`},
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		p := ce.Problems[i]
		if p.Line != w.line || p.Path != w.path || !strings.Contains(p.Msg, w.msg) || p.Fix == "" || p.File != "testdata/three-mistakes.yaml" {
			t.Errorf("problem %d = %+v, want line %d path %s msg %q with a fix", i, p, w.line, w.path, w.msg)
		}
	}
	s := err.Error()
	for _, frag := range []string{"testdata/three-mistakes.yaml:10: listeners[0].tlcp.cipher_suites", "known fields here: sign_cert", "(legacy-api)"} {
		if !strings.Contains(s, frag) {
			t.Errorf("error text lacks %q:\n%s", frag, s)
		}
	}
}

func TestValidationProblems(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings of problems, in order
	}{
		{"empty", "", []string{"the configuration is empty"}},
		{"syntax", "listeners: [\n", []string{"not valid YAML"}},
		{"no listeners", "admin: {listen: 127.0.0.1:1}\n", []string{"listeners: no listener is configured"}},
		{"tls section on tlcp", `
listeners:
  - listen: ":1"
    protocol: tlcp
    tls: {cert: a, key: b}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].tlcp: a tlcp listener needs a tlcp section",
			"listeners[0].tls: a tlcp listener does not use a tls section",
		}},
		{"tls13 shangmi", `
listeners:
  - listen: ":1"
    tlcp: {sign_cert: a, sign_key: "file:k", enc_cert: b, enc_key: "file:k2", tls13_shangmi: always, tls13_groups: [curveSM2, X25519]}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			`listeners[0].tlcp.tls13_groups[1]: unknown TLS 1.3 ShangMi group "X25519"; use curveSM2MLKEM768 or curveSM2`,
			`listeners[0].tlcp.tls13_shangmi: unknown tls13_shangmi "always"; use one of prefer, accept, off`,
		}},
		{"auto without tls and tls13_shangmi off", `
listeners:
  - listen: ":1"
    protocol: auto
    tlcp: {sign_cert: a, sign_key: "file:k", enc_cert: b, enc_key: "file:k2", tls13_shangmi: "off"}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].tls: an auto listener needs a tls section for its TLS clients",
		}},
		{"inline secrets", `
listeners:
  - listen: ":1"
    tlcp:
      sign_cert: a
      sign_key: "file:/k?password=hunter2"
      enc_cert: b
      enc_key: "-----BEGIN PRIVATE KEY-----"
      suites: [ECC_SM4_GCM_SM3, RC4]
      client_auth: require_and_verify
    routes: [{upstream: u, path: api}]
upstreams: {u: {targets: ["http://h:1", "tcp://h:2", "ftp://x"], policy: random, retries: 20}}
`, []string{
			"client_ca: client_auth: require_and_verify needs",
			"sign_key: the password is written in the configuration",
			"enc_key: PEM data written inline",
			`suites[1]: unknown cipher suite "RC4"`,
			`routes[0].path: "api" does not start with /`,
			`policy: unknown policy "random"`,
			"retries: 20 is out of range",
			"targets[1]: a tcp:// target in a pool of http:// targets",
			`targets[2]: unknown scheme "ftp"`,
		}},
		{"types", `
limits: {max_connections: many}
listeners:
  listen: ":1"
`, []string{
			"limits.max_connections: expected a whole number, found a string `many`",
			"listeners: expected a list, found a mapping",
		}},
		{"session cache and headers", `
listeners:
  - listen: ":1"
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d, session_cache: {size: -1, lifetime: 48h}}
    session_headers: {client_verified: "Client Verified"}
    routes: [{upstream: u}]
  - listen: ":2"
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d, session_cache: {size: 2000000, lifetime: -1s}}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].tlcp.session_cache.lifetime: 48h0m0s is out of range",
			"listeners[0].tlcp.session_cache.size: -1 is out of range",
			"listeners[0].session_headers.client_verified: \"Client Verified\" is not a valid header name",
			"listeners[1].tlcp.session_cache.lifetime: -1s is out of range",
			"listeners[1].tlcp.session_cache.size: 2000000 is out of range",
		}},
		{"session store", `
session_store:
  keys_file: "-----BEGIN KEYS"
  keys_env: GMGATE_SESSION_KEYS
  redis:
    addrs: ["redis", "r2:6379"]
    password: hunter2
    password_env: A
    password_file: b
    db: 3
    timeout: 10s
    tls: {cert: c}
listeners:
  - listen: ":1"
    shared_sessions: true
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d, session_cache: {size: 0}}
    routes: [{upstream: u}]
  - {listen: ":2", protocol: http, shared_sessions: true, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"session_store.keys_env: keys_file and keys_env are both set",
			`session_store.redis.addrs[0]: "redis" is not host:port`,
			"session_store.redis.password: the password is written in the configuration",
			"session_store.redis.password_file: password_env and password_file are both set",
			"session_store.redis.db: a Redis Cluster has database 0 only",
			"session_store.redis.timeout: 10s is out of range",
			"session_store.redis.tls: a client certificate needs both cert and key",
			"listeners[0].shared_sessions: session resumption is off",
			"listeners[1].shared_sessions: an http listener has no sessions",
		}},
		// An upstream written wrongly is one problem, at the upstream; the
		// routes that name it are not told it does not exist.
		{"upstream written as its list of targets", `
listeners:
  - {listen: ":1", protocol: http, routes: [{upstream: app}]}
upstreams:
  app: ["http://h:1"]
`, []string{
			"x.yaml:5: upstreams.app: expected a mapping (key: value lines), found a list",
		}},
		{"upstream left empty", `
listeners:
  - {listen: ":1", protocol: http, routes: [{upstream: app}]}
upstreams:
  app:
`, []string{
			"x.yaml:5: upstreams.app: the upstream is empty",
		}},
		{"listener written as a name", `
listeners:
  - edge
`, []string{
			"x.yaml:3: listeners[0]: expected a mapping (key: value lines), found a string `edge`",
		}},
		{"session store timeout below a millisecond", `
session_store:
  keys_env: K
  redis: {addrs: ["r:6379"], timeout: 100us}
listeners:
  - {listen: ":1", shared_sessions: true, tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"session_store.redis.timeout: 100µs is out of range; use a duration from 1ms to 5s",
		}},
		{"sentinel settings without master_name", `
session_store:
  keys_env: K
  redis:
    addrs: ["s1:26379"]
    sentinel_username: u
    sentinel_password_env: A
    sentinel_password_file: b
listeners:
  - {listen: ":1", shared_sessions: true, tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"session_store.redis.sentinel_username: Sentinel credentials without master_name",
			"session_store.redis.sentinel_password_env: Sentinel credentials without master_name",
			"session_store.redis.sentinel_password_file: Sentinel credentials without master_name",
		}},
		{"sentinel without sentinels", `
session_store:
  keys_env: K
  redis: {master_name: mymaster, addrs: [], sentinel_password_env: A, sentinel_password_file: b}
listeners:
  - {listen: ":1", shared_sessions: true, tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"session_store.redis.addrs: no address given; list the Sentinels",
			"session_store.redis.sentinel_password_file: sentinel_password_env and sentinel_password_file are both set",
		}},
		{"shared without a store", `
listeners:
  - listen: ":1"
    shared_sessions: true
    tls: {acme: {domains: [example.cn], shared: true}}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].shared_sessions: there is no session_store",
			"listeners[0].tls.acme.shared: there is no session_store",
		}},
		{"session store without keys or redis", `
session_store: {}
listeners:
  - {listen: ":1", tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"session_store: no sealing keys",
			"session_store.redis: no Redis server given",
		}},
		{"duplicates", `
listeners:
  - {name: a, listen: ":1", tls: {cert: c, key: k, min_version: "1.1"}, routes: [{upstream: t, path: /x}]}
  - {name: a, listen: ":1", tls: {cert: c, key: k}, routes: [{upstream: u}, {upstream: u}]}
upstreams:
  t: {targets: ["tcp://h:1"]}
  u: {targets: ["https://h"], tls: {cert: c}, health: {path: nope}}
`, []string{
			`listeners[0].routes[0].path: routes to tcp:// upstreams`,
			`listeners[0].tls.min_version: unknown TLS version "1.1"`,
			`listeners[1].listen: address ":1" is already used`,
			`listeners[1].name: name "a" is already used`,
			`listeners[1].routes[1]: the same host and path as routes[0]`,
			`upstreams.u.health.path: "nope" does not start with /`,
			`upstreams.u.tls: a client certificate needs both cert and key`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := wantProblems(t, c.yaml, c.want)
			if strings.Contains(err.Error(), "hunter2") {
				t.Error("the error repeats a secret")
			}
		})
	}
}

func TestShowRoundTrip(t *testing.T) {
	cfg, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Show(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("shown.yaml", out)
	if err != nil {
		t.Fatalf("shown configuration does not parse:\n%s\n%v", out, err)
	}
	out2, err := Show(again)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Errorf("show is not stable:\n%s\n---\n%s", out, out2)
	}
}

func TestExampleIsValid(t *testing.T) {
	if _, err := Parse("example.yaml", []byte(Example)); err != nil {
		t.Fatal(err)
	}
	// The examples shipped for systemd and in the container image.
	for _, f := range []string{"../deploy/gmgate.yaml", "../deploy/docker/gmgate.yaml"} {
		if _, err := Load(f); err != nil {
			t.Fatal(err)
		}
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(Example), &n); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMissingAndHuge(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "testdata/does-not-exist.yaml does not exist") || !strings.Contains(err.Error(), "gmgate config show") {
		t.Errorf("missing file: %v", err)
	}
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), dir+" is a directory") || !strings.Contains(err.Error(), "the configuration file") {
		t.Errorf("directory: %v", err)
	}
	big := t.TempDir() + "/big.yaml"
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/good.yaml", "testdata/three-mistakes.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(Example))
	f.Add([]byte(sitesYAML))
	f.Add([]byte("listeners: [{listen: ':1', routes: [{upstream: x}]}]\nupstreams: {x: ~}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("limits: {handshake_wait: [1]}\n"))
	f.Add([]byte("listeners:\n  - {listen: ':1', listen: ':2'}\n  - listen: ':3'\nupstreams: {x: ~}\nupstreams: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned cfg=%v err=%v", cfg != nil, err)
		}
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		if _, err := Show(cfg); err != nil {
			t.Fatalf("show: %v", err)
		}
	})
}

// wantProblems parses yaml and checks that its problems contain want, in
// order; it returns the error.
func wantProblems(t *testing.T, yaml string, want []string) error {
	t.Helper()
	_, err := Parse("x.yaml", []byte(yaml))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		if s := ce.Problems[i].String(); !strings.Contains(s, w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, s, w)
		}
	}
	return err
}

// A password or PIN written into a key reference is refused in whatever
// case or percent-encoding, and the problem never repeats it.
func TestInlineSecretsInAnyCaseOrEncoding(t *testing.T) {
	for _, ref := range []string{
		"file:/k?Password=hunter2",
		"file:/k?PASSWORD=hunter2",
		"file:/k?password%3Dhunter2",
		"file:/k?password%3dhunter2",
		"file:/k?%70assword=hunter2",
		"sdf:/lib.so?index=1&key=sign&PIN=hunter2",
		"sdf:/lib.so?index=1&key=sign&pin%3Dhunter2",
		"sdf:/lib.so?index=1&key=sign&Pin%253Dhunter2",
		"/etc/gmgate/k.pem?Password=hunter2",
	} {
		yml := `
listeners:
  - listen: ":1"
    tls: {cert: c, key: "` + ref + `"}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`
		_, err := Parse("x.yaml", []byte(yml))
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0].String(), "listeners[0].tls.key: the ") ||
			!strings.Contains(ce.Problems[0].String(), "is written in the configuration") {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the secret: %v", ref, err)
		}
	}
}

func TestHardeningKeys(t *testing.T) {
	base := `
listeners:
  - listen: ":1"
    tls: {cert: c, key: k}
    routes: [{upstream: u}]
`
	cfg, err := Parse("x.yaml", []byte(base+"upstreams: {u: {targets: [\"http://h:1\"]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeouts.ClientHello.D() != DefaultClientHello || cfg.Timeouts.RequestBody.D() != DefaultRequestBody ||
		cfg.Limits.MaxResponseHeaderBytes != DefaultMaxRespHeader || *cfg.Upstreams["u"].Passive.PanicThreshold != DefaultPanicThreshold {
		t.Errorf("defaults not applied: %+v %+v %+v", cfg.Timeouts, cfg.Limits, cfg.Upstreams["u"].Passive)
	}
	cfg, err = Parse("x.yaml", []byte(base+`upstreams: {u: {targets: ["http://h:1"], passive: {panic_threshold: 0}}}
timeouts: {client_hello: 2s, request_body: 1m}
limits: {max_response_header_bytes: 8192}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeouts.ClientHello.D() != 2*time.Second || cfg.Timeouts.RequestBody.D() != time.Minute || cfg.Limits.MaxResponseHeaderBytes != 8192 || *cfg.Upstreams["u"].Passive.PanicThreshold != 0 {
		t.Errorf("values not read: %+v %+v", cfg.Timeouts, cfg.Limits)
	}
	_, err = Parse("x.yaml", []byte(base+`upstreams: {u: {targets: ["http://h:1"], passive: {panic_threshold: 150}}}
timeouts: {request_body: -1s}
limits: {max_response_header_bytes: -1}
`))
	for _, want := range []string{
		"upstreams.u.passive.panic_threshold: 150 is not a percentage",
		"timeouts.request_body: a duration may not be negative",
		"limits.max_response_header_bytes: must be greater than zero",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// A key written twice in one mapping is one problem at its second line,
// with its field path and the fix. YAML leaves the whole mapping unread
// then, so nothing that follows from its absence (no listener, an
// upstream that does not exist, a listener counted under the wrong index)
// is reported on top of it.
func TestDuplicateKeys(t *testing.T) {
	const base = `listeners:
  - name: a
    listen: ":1"
    protocol: tlcp
    tlcp: {sign_cert: s, sign_key: k, enc_cert: e, enc_key: k2}
    routes: [{upstream: app}]
  - name: b
    listen: ":2"
    tlcp: {sign_cert: s, sign_key: k, enc_cert: e, enc_key: k2}
    routes: [{upstream: app}]
upstreams:
  app:
    targets: ["http://h:1"]
`
	cases := []struct {
		name, yaml string
		line       int
		path       string
		first      int
	}{
		{"top level", base + "upstreams:\n  other: {targets: [\"http://h:2\"]}\n", 14, "upstreams", 11},
		{"in a listener", strings.Replace(base, `    listen: ":1"`+"\n", `    listen: ":1"`+"\n    listen: \":3\"\n", 1), 4, "listeners[0].listen", 3},
		{"in an upstream", base + `    targets: ["http://h:2"]` + "\n", 14, "upstreams.app.targets", 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("dup.yaml", []byte(c.yaml))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if len(ce.Problems) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ce.Problems), err)
			}
			p := ce.Problems[0]
			if p.Line != c.line || p.Path != c.path || !strings.Contains(p.Msg, fmt.Sprintf("line %d", c.first)) || !strings.Contains(p.Fix, "keep one") {
				t.Errorf("problem = %+v, want line %d, path %s, the first line %d and a fix", p, c.line, c.path, c.first)
			}
		})
	}
}

// A duration written as a mapping or a list is placed at its key, with
// how to write one.
func TestDurationOfTheWrongKind(t *testing.T) {
	doc := "timeouts:\n  idle:\n    s: 5\n  shutdown:\n    - 5s\n"
	_, err := Parse("gmgate.yaml", []byte(doc))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want a configuration error", err)
	}
	want := map[string]string{
		"timeouts.idle":     `gmgate.yaml:2: timeouts.idle: expected a duration, found a mapping; write it as "5s", "250ms" or "1m30s"`,
		"timeouts.shutdown": `gmgate.yaml:4: timeouts.shutdown: expected a duration, found a list; write it as "5s", "250ms" or "1m30s"`,
	}
	for _, p := range cerr.Problems {
		if w, ok := want[p.Path]; ok {
			if p.String() != w {
				t.Errorf("got  %s\nwant %s", p, w)
			}
			delete(want, p.Path)
		}
	}
	for path := range want {
		t.Errorf("no problem at %s in %v", path, err)
	}
}

// max_conns_per_target and its queue default from limits.max_connections,
// are read when set, and their wrong values are each one problem at
// their line; tcp:// upstreams take none of them.
func TestTargetLimitKeys(t *testing.T) {
	const base = `limits: {max_connections: 300}
listeners:
  - listen: ":1"
    tls: {cert: c, key: k}
    routes: [{upstream: u}]
`
	cfg, err := Parse("x.yaml", []byte(base+"upstreams:\n  u: {targets: [\"h2c://h:1\"]}\n  v:\n    targets: [\"https://h:2\"]\n    max_conns_per_target: 64\n    queue_size: 0\n    queue_timeout: 250ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	u, v := cfg.Upstreams["u"], cfg.Upstreams["v"]
	if *u.MaxConnsPerTarget != 300 || *u.QueueSize != 300 || u.QueueTimeout.D() != DefaultQueueTimeout {
		t.Errorf("defaults: %d, %d, %v; want 300, 300, %v", *u.MaxConnsPerTarget, *u.QueueSize, u.QueueTimeout, DefaultQueueTimeout)
	}
	if *v.MaxConnsPerTarget != 64 || *v.QueueSize != 0 || v.QueueTimeout.D() != 250*time.Millisecond {
		t.Errorf("values set: %d, %d, %v", *v.MaxConnsPerTarget, *v.QueueSize, v.QueueTimeout)
	}

	doc := base + `upstreams:
  u:
    targets: ["http://h:1"]
    max_conns_per_target: 0
    queue_size: -1
    queue_timeout: -5s
  db:
    targets: ["tcp://h:5432"]
    max_conns_per_target: 10
`
	_, err = Parse("x.yaml", []byte(doc))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want a configuration error", err)
	}
	want := map[string]string{
		"upstreams.u.max_conns_per_target":  "x.yaml:9: upstreams.u.max_conns_per_target: must be greater than zero, not 0; remove it for the default, limits.max_connections",
		"upstreams.u.queue_size":            "x.yaml:10: upstreams.u.queue_size: may not be negative, not -1; use 0 to answer 503 at once when every connection is in use",
		"upstreams.u.queue_timeout":         `x.yaml:11: upstreams.u.queue_timeout: a duration may not be negative; write a duration such as "5s", or use queue_size: 0 for no waiting`,
		"upstreams.db.max_conns_per_target": "x.yaml:14: upstreams.db.max_conns_per_target: tcp:// targets take one connection per client connection, which limits.max_connections bounds; remove max_conns_per_target",
	}
	for _, p := range cerr.Problems {
		w, ok := want[p.Path]
		if !ok {
			t.Errorf("unexpected problem %s", p)
			continue
		}
		if p.String() != w {
			t.Errorf("got  %s\nwant %s", p, w)
		}
		delete(want, p.Path)
	}
	for path := range want {
		t.Errorf("no problem at %s in %v", path, err)
	}
}

// timeouts.request_body_min_rate defaults to 500 bytes a second, 0 turns
// it off, and a negative rate is one problem at its line.
func TestRequestBodyMinRate(t *testing.T) {
	const base = `listeners:
  - listen: ":1"
    tls: {cert: c, key: k}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`
	for doc, want := range map[string]int{base: DefaultRequestBodyMinRate, base + "timeouts: {request_body_min_rate: 0}\n": 0, base + "timeouts: {request_body_min_rate: 64}\n": 64} {
		cfg, err := Parse("x.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := *cfg.Timeouts.RequestBodyMinRate; got != want {
			t.Errorf("request_body_min_rate %d, want %d in\n%s", got, want, doc)
		}
	}
	_, err := Parse("x.yaml", []byte(base+"timeouts:\n  request_body_min_rate: -1\n"))
	const want = "x.yaml:7: timeouts.request_body_min_rate: may not be negative, not -1; write bytes a second, such as 500, or 0 to turn the bound off"
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0].String() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

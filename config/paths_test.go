package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadResolvesPathsAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "etc")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "gmgate.yaml")
	data := `state_dir: state
log: {access: logs/access.log}
listeners:
  - listen: ":1"
    tlcp:
      sign_cert: certs/sign.crt
      sign_key: certs/sign.key
      enc_cert: /abs/enc.crt
      enc_key: "file:certs/enc.key?password-file=secrets/pw&x=a%2Bb"
      client_ca: ../ca.crt
    tls:
      acme: {domains: [www.example.cn], ca_root: pebble.pem}
    routes: [{upstream: u}]
  - listen: ":2"
    protocol: tls
    tls: {cert: t.crt, key: "sdf:lib/libsdf.so?index=1&key=sign&pin-file=pin", sm2: {cert: gm/s.crt, key: gm/s.key, client_ca: gm/ca.crt}}
    routes: [{upstream: u}]
upstreams:
  u: {targets: ["https://h:1"], tls: {ca: up/ca.crt, cert: up/c.crt, key: up/c.key}}
  g: {targets: ["tls13sm://h:1"], tls13sm: {ca: gm/ca.crt, sign_cert: gm/c.crt, sign_key: gm/c.key, revocation: {crl: [gm/crl.pem]}}}
`
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	// From another working directory, by a relative name.
	t.Chdir(dir)
	cfg, err := Load("etc/gmgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l0, l1 := cfg.Listeners[0], cfg.Listeners[1]
	for _, c := range []struct{ got, want string }{
		{cfg.StateDir, sub + "/state"},
		{cfg.Log.Access, sub + "/logs/access.log"},
		{l0.TLCP.SignCert, sub + "/certs/sign.crt"},
		{l0.TLCP.SignKey, sub + "/certs/sign.key"},
		{l0.TLCP.EncCert, "/abs/enc.crt"},
		{l0.TLCP.EncKey, "file:" + sub + "/certs/enc.key?password-file=" + sub + "/secrets/pw&x=a%2Bb"},
		{l0.TLCP.ClientCA, dir + "/ca.crt"},
		{l0.TLS.ACME.CARoot, sub + "/pebble.pem"},
		{l1.TLS.Cert, sub + "/t.crt"},
		{l1.TLS.Key, "sdf:" + sub + "/lib/libsdf.so?index=1&key=sign&pin-file=" + sub + "/pin"},
		{cfg.Upstreams["u"].TLS.CA, sub + "/up/ca.crt"},
		{cfg.Upstreams["u"].TLS.Key, sub + "/up/c.key"},
		{l1.TLS.SM2.Cert, sub + "/gm/s.crt"},
		{l1.TLS.SM2.Key, sub + "/gm/s.key"},
		{l1.TLS.SM2.ClientCA, sub + "/gm/ca.crt"},
		{cfg.Upstreams["g"].TLS13SM.CA, sub + "/gm/ca.crt"},
		{cfg.Upstreams["g"].TLS13SM.SignCert, sub + "/gm/c.crt"},
		{cfg.Upstreams["g"].TLS13SM.SignKey, sub + "/gm/c.key"},
		{cfg.Upstreams["g"].TLS13SM.Revocation.CRL[0], sub + "/gm/crl.pem"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// config show prints the resolved paths, and reads back the same.
	out, err := Show(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "sign_cert: "+sub+"/certs/sign.crt") {
		t.Errorf("show does not print resolved paths:\n%s", out)
	}
}

func TestResolveKeyRefKeepsOtherForms(t *testing.T) {
	for _, c := range []struct{ ref, want string }{
		{"/k.pem", "/k.pem"},
		{"k.pem", "/d/k.pem"},
		{"./k.pem", "/d/k.pem"},
		{"file:/k.pem?password-env=PW", "file:/k.pem?password-env=PW"},
		{"file:k.pem?password-env=PW", "file:/d/k.pem?password-env=PW"},
		{"file:///k.pem", "file:///k.pem"},
		{"sdf:/opt/libsdf.so?pin-file=/run/pin", "sdf:/opt/libsdf.so?pin-file=/run/pin"},
		{"file:k.pem?password-file=a%20b", "file:/d/k.pem?password-file=/d/a%20b"},
	} {
		if got := resolveKeyRef("/d", c.ref); got != c.want {
			t.Errorf("resolveKeyRef(%q) = %q, want %q", c.ref, got, c.want)
		}
	}
}

func TestAddressesAndHTTPListeners(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"wildcard next to specific, admin on a listener", `
admin: {listen: "127.0.0.1:8443"}
listeners:
  - {listen: ":8443", tls: {cert: c, key: k}, routes: [{upstream: u}]}
  - {listen: "127.0.0.1:8443", tls: {cert: c, key: k}, routes: [{upstream: u}]}
  - {listen: "0.0.0.0:9443", tls: {cert: c, key: k}, routes: [{upstream: u}]}
  - {listen: "[::1]:9443", tls: {cert: c, key: k}, routes: [{upstream: u}]}
  - {listen: "10.0.0.1:9443", tls: {cert: c, key: k}, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			`admin.listen: "127.0.0.1:8443" and ":8443" of listeners[0] share a port`,
			`admin.listen: "127.0.0.1:8443" is also the address of listeners[1]`,
			`listeners[1].listen: "127.0.0.1:8443" and ":8443" of listeners[0] share a port`,
			`listeners[4].listen: "10.0.0.1:9443" and "0.0.0.0:9443" of listeners[2] share a port`,
		}},
		{"http listeners", `
listeners:
  - {listen: ":80", protocol: http, redirect_https: true, routes: [{upstream: u}]}
  - {listen: ":81", redirect_https: true}
  - {listen: ":82", protocol: http, tls: {cert: c, key: k}}
  - {listen: ":83", tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}, redirect_https: true, routes: [{upstream: u}]}
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].redirect_https: there is no tls or auto listener to redirect to",
			"listeners[0].routes: an http listener with redirect_https redirects every request",
			"listeners[1].redirect_https: there is no tls or auto listener",
			"listeners[2].routes: the listener has no route",
			"listeners[2].tls: an http listener does not use a tls section",
			"listeners[3].redirect_https: only an http listener redirects to HTTPS",
		}},
		{"acme", `
listeners:
  - listen: ":443"
    tls:
      cert: c
      acme: {domains: ["*.example.cn", "10.0.0.1"], ca: "ftp://x", key_type: dsa, challenges: [http-01, dns-01]}
    routes: [{upstream: u}]
  - listen: ":8443"
    tls: {acme: {}}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`, []string{
			"listeners[0].tls.acme: acme is set together with cert/key",
			`listeners[0].tls.acme.ca: "ftp://x" is not an ACME directory URL`,
			"listeners[0].tls.acme.challenges[0]: http-01 is answered by an http listener, and there is none",
			`listeners[0].tls.acme.challenges[1]: unknown challenge "dns-01"`,
			`listeners[0].tls.acme.domains[0]: "*.example.cn" is a wildcard`,
			`listeners[0].tls.acme.domains[1]: "10.0.0.1" is not a domain name`,
			`listeners[0].tls.acme.key_type: unknown key type "dsa"`,
			"listeners[1].tls.acme.domains: no domain given",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantProblems(t, c.yaml, c.want) })
	}
}

func TestACMEDefaults(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(`
listeners:
  - {name: port80, listen: ":80", redirect_https: true}
  - listen: ":443"
    tls: {acme: {domains: [www.example.cn]}}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Listeners[1].TLS.ACME
	if cfg.Listeners[0].Protocol != ProtocolHTTP || a.CA != DefaultACMECA || a.KeyType != "p256" ||
		strings.Join(a.Challenges, ",") != "http-01,tls-alpn-01" || cfg.StateDir != DefaultStateDir {
		t.Errorf("defaults: protocol %q, acme %+v, state_dir %q", cfg.Listeners[0].Protocol, a, cfg.StateDir)
	}
	if port, _ := cfg.HTTPSPort(); port != "443" {
		t.Errorf("HTTPSPort = %q", port)
	}
}

func TestSessionStoreDefaultsAndPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(`
session_store:
  keys_file: secrets/session.keys
  redis:
    addrs: ["redis:6379"]
    password_file: secrets/redis.password
    master_name: mymaster
    sentinel_password_file: secrets/sentinel.password
    db: 2
    tls: {ca: redis-ca.pem}
listeners:
  - listen: ":443"
    shared_sessions: true
    tlcp: {sign_cert: a, sign_key: b, enc_cert: c, enc_key: d}
    routes: [{upstream: u}]
upstreams: {u: {targets: ["http://h:1"]}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	ss := cfg.SessionStore
	if ss.KeysFile != filepath.Join(dir, "secrets/session.keys") || ss.Redis.PasswordFile != filepath.Join(dir, "secrets/redis.password") || ss.Redis.SentinelPasswordFile != filepath.Join(dir, "secrets/sentinel.password") || ss.Redis.TLS.CA != filepath.Join(dir, "redis-ca.pem") {
		t.Errorf("paths not resolved against the file: %+v %+v", ss, ss.Redis.TLS)
	}
	if ss.Redis.KeyPrefix != DefaultRedisKeyPrefix || ss.Redis.Timeout.D() != DefaultRedisTimeout {
		t.Errorf("defaults: prefix %q, timeout %s", ss.Redis.KeyPrefix, ss.Redis.Timeout)
	}
	if !cfg.Listeners[0].SharedSessions {
		t.Error("shared_sessions lost")
	}
	// config show prints it back the same.
	out, err := Show(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(file, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if again.SessionStore.KeysFile != ss.KeysFile || !reflect.DeepEqual(again.SessionStore.Redis, ss.Redis) || !again.Listeners[0].SharedSessions {
		t.Errorf("show did not round-trip the session store:\n%s", out)
	}
}

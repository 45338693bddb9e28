package config

import "testing"

const sitesYAML = `listeners:
  - name: edge
    listen: ":443"
    session_headers: {suite: X-TLCP-Suite}
    sites:
      - name: api
        hosts: [api.example.cn]
        default: true
        tlcp: {sign_cert: a.sign.crt, sign_key: a.sign.key, enc_cert: a.enc.crt, enc_key: a.enc.key}
        tls: {cert: a.crt, key: a.key}
        routes: [{upstream: app}]
      - name: www
        hosts: ["*.example.cn", www.example.com]
        tls: {cert: w.crt, key: w.key, client_auth: require_and_verify, client_ca: ca.crt}
        session_headers: {protocol: X-Proto}
        routes: [{upstream: grpc}]
upstreams:
  app: {targets: ["http://10.0.0.5:8080"]}
  grpc: {targets: ["h2c://10.0.0.6:50051"]}
  tls2: {targets: ["https://10.0.0.7"], http2: true}
`

func TestSitesDefaults(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte(sitesYAML))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Listeners[0]
	if l.Protocol != ProtocolAuto || !l.ServesHTTP2() {
		t.Errorf("protocol %q, http2 %v", l.Protocol, l.ServesHTTP2())
	}
	sites := l.SiteList()
	if len(sites) != 2 || sites[0].TLCP.ClientAuth != "none" || len(sites[0].TLCP.Suites) == 0 || sites[1].TLS.MinVersion != "1.2" {
		t.Fatalf("site defaults not applied: %+v", sites)
	}
	// A site without session_headers takes the listener's; one with its
	// own keeps them.
	if sites[0].SessionHeaders.Suite != "X-TLCP-Suite" || sites[1].SessionHeaders.Suite != "" || sites[1].SessionHeaders.Protocol != "X-Proto" {
		t.Errorf("session headers: %+v, %+v", sites[0].SessionHeaders, sites[1].SessionHeaders)
	}
	if sites[1].Routes[0].Path != "/" {
		t.Errorf("route default path %q", sites[1].Routes[0].Path)
	}
	if p := l.SitePath("listeners[0]", 1); p != "listeners[0].sites[1]" {
		t.Errorf("site path %q", p)
	}
	// The flat form is one implicit default site.
	flat := Listener{TLCP: &TLCP{}, Routes: []Route{{Upstream: "a"}}}
	one := flat.SiteList()
	if len(one) != 1 || !one[0].Implicit || !one[0].Default || one[0].Name != DefaultSiteName || one[0].TLCP != flat.TLCP {
		t.Errorf("flat form: %+v", one)
	}
	if flat.SitePath("listeners[3]", 0) != "listeners[3]" {
		t.Error("flat form site path is not the listener's")
	}
	if cfg.Upstreams["grpc"].Scheme() != "h2c" {
		t.Errorf("h2c scheme: %q", cfg.Upstreams["grpc"].Scheme())
	}
	// What Show prints reads back.
	showParses(t, cfg)
}

func TestSitesProblems(t *testing.T) {
	wantProblems(t, `listeners:
  - name: edge
    listen: ":443"
    protocol: tlcp
    tlcp: {sign_cert: a, sign_key: a, enc_cert: a, enc_key: a}
    sites:
      - name: api
        hosts: [api.example.cn, "*.example.cn"]
        default: true
        tlcp: {sign_cert: a, sign_key: a, enc_cert: a, enc_key: a}
        routes: [{upstream: app}]
      - name: "api"
        hosts: [API.example.cn, "bad host", "127.1"]
        default: true
        tls: {cert: b, key: b}
        routes: [{upstream: app}]
      - name: www
        hosts: ["*.example.cn"]
        tlcp: {sign_cert: a, sign_key: a, enc_cert: a, enc_key: a}
      - name: nohost
        tlcp: {sign_cert: a, sign_key: a, enc_cert: a, enc_key: a}
        routes: [{upstream: app}]
  - name: plain
    listen: ":80"
    protocol: http
    http2: true
    sites:
      - name: x
        hosts: [x.example.cn]
        routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://10.0.0.5:8080"], http2: true}
  g: {targets: ["h2c://10.0.0.6"]}
`, []string{
		"listeners[0].tlcp: a listener with sites keeps its tlcp in each site",
		`listeners[0].sites[1].name: name "api" is already used by sites[0]`,
		"listeners[0].sites[1].tlcp: a site of a tlcp listener needs a tlcp section",
		`listeners[0].sites[1].hosts[0]: "API.example.cn" is listed by sites[0] too`,
		`listeners[0].sites[1].hosts[1]: "bad host" is not a host name or wildcard`,
		`listeners[0].sites[1].hosts[2]: "127.1" is not a host name or wildcard`,
		"listeners[0].sites[1].default: sites[0] is the default already",
		"listeners[0].sites[1].tls: a tlcp listener does not use a tls section",
		"listeners[0].sites[2].routes: the site has no route",
		`listeners[0].sites[2].hosts[0]: "*.example.cn" is listed by sites[0] too`,
		"listeners[0].sites[3].hosts: the site lists no host",
		"listeners[1].http2: an http listener does not offer HTTP/2",
		"listeners[1].sites: an http listener has no sites",
		"upstreams.app.http2: http2 applies to https:// and tlcp:// targets; write the targets as h2c://",
		`upstreams.g.targets[0]: "h2c://10.0.0.6" has no port`,
	})
}

// A host written with a trailing dot is refused with the fix: the same
// name without it.
func TestSitesHostTrailingDot(t *testing.T) {
	wantProblems(t, `listeners:
  - name: edge
    listen: ":443"
    protocol: tlcp
    sites:
      - name: api
        hosts: [api.example.cn., "*.img.example.cn."]
        default: true
        tlcp: {sign_cert: a, sign_key: a, enc_cert: a, enc_key: a}
        routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://10.0.0.5:8080"]}
`, []string{
		`listeners[0].sites[0].hosts[0]: "api.example.cn." ends in a dot; write it without the trailing dot, "api.example.cn": a site's names match without it`,
		`listeners[0].sites[0].hosts[1]: "*.img.example.cn." ends in a dot; write it without the trailing dot, "*.img.example.cn"`,
	})
}

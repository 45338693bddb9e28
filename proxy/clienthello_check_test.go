package proxy

import (
	"strings"
	"testing"
)

// A timeouts.client_hello longer than timeouts.handshake cannot take
// effect (the handshake timeout closes the connection first): config
// check warns, naming both fields. A handshake timeout lowered below the
// default client_hello, which is not in the file, is not warned about.
func TestClientHelloLongerThanHandshakeWarns(t *testing.T) {
	doc := func(timeouts string) string {
		return tcpListenerDoc("127.0.0.1:0", "off", "timeouts: {"+timeouts+"}\n")
	}
	for _, c := range []struct {
		timeouts, want string
	}{
		{"handshake: 3s, client_hello: 8s", "gmgate.yaml:3: timeouts.client_hello: 8s is longer than timeouts.handshake (3s), which closes a connection whose ClientHello has not arrived by then; set client_hello to at most 3s, or raise handshake"},
		{"handshake: 3s", ""},
		{"handshake: 10s, client_hello: 10s", ""},
	} {
		res, err := Check(parseConfig(t, doc(c.timeouts)), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range res.Warnings {
			if strings.Contains(w.String(), "client_hello") {
				got = append(got, w.String())
			}
		}
		if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
			t.Errorf("timeouts {%s}: warnings %q, want %q", c.timeouts, got, c.want)
		}
	}
}

// tcpListenerDoc is a configuration of one loopback tcp listener with the
// given admin.listen and log.access; extra (whole lines) comes third.
func tcpListenerDoc(admin, access, extra string) string {
	return `admin: {listen: "` + admin + `"}
log: {access: "` + access + `"}
` + extra + `listeners:
  - name: app
    listen: "127.0.0.1:0"
    protocol: tcp
    routes: [{upstream: app}]
upstreams:
  app:
    targets: ["tcp://127.0.0.1:1"]
    health: {disabled: true}
`
}

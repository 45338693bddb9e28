package config

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// Show renders a configuration, defaults included, as YAML that Parse
// reads back to the same configuration. Optional keys that are not set
// (null, empty strings, empty lists) are left out rather than printed
// empty.
func Show(c *Config) ([]byte, error) {
	return render(c, false)
}

// ShowSet renders a configuration built in code before Defaults, with only
// the keys it sets: zero numbers and false are left out too, so that the
// defaults apply when the file is read.
func ShowSet(c *Config) ([]byte, error) {
	return render(c, true)
}

func render(c *Config, dropZero bool) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, err
	}
	prune(&doc, dropZero)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// prune removes the mapping entries whose value is unset: null, an empty
// string or list, and with dropZero 0 and false; and mappings left empty
// by that. A mapping that was empty to begin with (a section given as {})
// stays, since its presence can mean something.
func prune(n *yaml.Node, dropZero bool) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			prune(c, dropZero)
		}
	case yaml.MappingNode:
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			wasEmpty := v.Kind == yaml.MappingNode && len(v.Content) == 0
			prune(v, dropZero)
			if unset(v, dropZero) && !wasEmpty {
				continue
			}
			kept = append(kept, k, v)
		}
		n.Content = kept
	}
}

func unset(v *yaml.Node, dropZero bool) bool {
	switch v.Kind {
	case yaml.ScalarNode:
		switch {
		case v.Tag == "!!null":
			return true
		case v.Tag == "!!str" && v.Value == "":
			return true
		case dropZero && (v.Tag == "!!int" && v.Value == "0" || v.Tag == "!!bool" && v.Value == "false" || v.Tag == "!!str" && v.Value == "0s"):
			return true
		}
	case yaml.SequenceNode, yaml.MappingNode:
		return len(v.Content) == 0
	}
	return false
}

// Example is a complete configuration: TLCP (and TLS, for clients not yet
// migrated) in front of a legacy HTTP service, and client mode: local
// applications calling a TLCP-only partner.
const Example = `# gmgate configuration. Check it with: gmgate config check -c gmgate.yaml
admin:
  listen: 127.0.0.1:9180          # /metrics, /healthz, /readyz (loopback only by default)
  pprof: false                    # true: Go profiles under /debug/pprof/ on this listener
log:
  level: info
  access: stdout                  # stdout | stderr | off | /path/to/access.log
listeners:
  - name: edge
    listen: ":443"
    protocol: auto                # tlcp | tls | auto (TLCP and TLS on one port)
    tlcp:
      sign_cert: /etc/gmgate/site.sign.crt
      sign_key: /etc/gmgate/site.sign.key
      enc_cert: /etc/gmgate/site.enc.crt
      enc_key: file:/etc/gmgate/site.enc.key?password-env=GMGATE_ENC_KEY_PASSWORD
      suites: [ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3]
      client_auth: none           # none | request | require | verify_if_given | require_and_verify
      session_cache: {size: 20000, lifetime: 12h}   # size 0 turns resumption off
    tls:                          # the certificate legacy TLS clients already trust
      cert: /etc/gmgate/site.rsa.crt
      key: /etc/gmgate/site.rsa.key
      min_version: "1.2"
    session_headers:              # tell the service how the client connected
      protocol: X-TLCP-Protocol
      suite: X-TLCP-Suite
      client_subject: X-TLCP-Client-Subject    # only for a verified client certificate
      client_verified: X-TLCP-Client-Verified  # true or false
    routes:
      - host: api.example.cn
        path: /
        upstream: legacy-api
  - name: partner                 # client mode: local applications call a TLCP-only partner
    listen: 127.0.0.1:8080        # plain text: keep it on loopback
    protocol: http                # http | tcp (a byte stream, to tcp:// or tlcp:// upstreams)
    routes:
      - upstream: partner-api
upstreams:
  legacy-api:
    targets: ["http://10.0.0.5:8080", "http://10.0.0.6:8080"]
    policy: least_conn            # round_robin | least_conn
    health: {path: /healthz, interval: 5s, timeout: 2s}
    passive: {max_fails: 3, eject_for: 30s, panic_threshold: 50}
    retries: 1                    # idempotent requests that could not be sent
  partner-api:
    targets: ["tlcp://api.partner.cn:443"]
    tlcp:                         # gmgate as a TLCP client
      ca: /etc/gmgate/partner-ca.crt
      server_name: api.partner.cn
      sign_cert: /etc/gmgate/client.sign.crt    # when the partner asks for a client certificate
      sign_key: /etc/gmgate/client.sign.key
      profile: standard           # standard | gmssl (GmSSL 3 servers that ask for a client certificate) | auto
limits:
  max_connections: 20000         # per listener
  max_handshakes: 512            # per listener, taken once a ClientHello is in
  handshake_wait: 250ms
timeouts:
  handshake: 10s
  client_hello: 5s               # a client's whole ClientHello, before any handshake slot
  read_header: 10s
  request_body: 30s              # idle time allowed between reads of a request body
  idle: 2m
  upstream_connect: 5s
  upstream_response: 60s
  shutdown: 30s
`

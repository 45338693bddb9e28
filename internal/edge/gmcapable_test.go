package edge

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp"
)

// gmHello reads a ClientHello vector of tlcp/testdata/gm-capable-hellos
// (its records, in hex).
func gmHello(t testing.TB, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tlcp", "testdata", "gm-capable-hellos", file))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			text.WriteString(strings.Join(strings.Fields(line), ""))
		}
	}
	wire, err := hex.DecodeString(text.String())
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return wire
}

// The choice for a connection's first flight: GM-capable TLS hellos (the
// 360 vectors, TLCP suites last and first, and a TLS 1.2 hello with
// ECC_SM4_CBC_SM3) go by the setting of the TLCP site their server name
// chooses; any other hello, and any hello on a tls listener, is left
// alone.
func TestClassifyGMCapable(t *testing.T) {
	site := func(name string, hosts []string, isDefault, tlcpSite, toTLCP bool) *route.Site {
		s := &route.Site{Name: name, Hosts: hosts, IsDefault: isDefault, GMCapableTLCP: toTLCP}
		if tlcpSite {
			s.TLCP = &tlcp.Config{}
		}
		return s
	}
	// The vectors ask for server.test.
	tlcpSite := route.NewSiteTable([]*route.Site{site("gm", []string{"server.test"}, false, true, true)})
	tlsSetting := route.NewSiteTable([]*route.Site{site("gm", []string{"server.test"}, false, true, false)})
	noTLCP := route.NewSiteTable([]*route.Site{site("web", []string{"server.test"}, true, false, false), site("other", []string{"other.test"}, false, true, true)})
	otherName := route.NewSiteTable([]*route.Site{site("other", []string{"other.test"}, false, true, true)})
	byDefault := route.NewSiteTable([]*route.Site{site("other", []string{"other.test"}, true, true, true)})

	gmVectors := []string{"360-chromium86-gm-last.hex", "360-chromium86-gm-first.hex", "tls12-ecc-sm4-cbc-sm3.hex"}
	for _, file := range gmVectors {
		wire := gmHello(t, file)
		for _, tc := range []struct {
			name     string
			protocol string
			sites    *route.SiteTable
			want     string
		}{
			{"auto, site says tlcp", config.ProtocolAuto, tlcpSite, GMCapableTLCP},
			{"auto, site says tls", config.ProtocolAuto, tlsSetting, GMCapableTLS},
			{"auto, site without tlcp", config.ProtocolAuto, noTLCP, GMCapableTLS},
			{"auto, no site for the name", config.ProtocolAuto, otherName, GMCapableTLS},
			{"auto, the default site", config.ProtocolAuto, byDefault, GMCapableTLCP},
			{"tlcp, site says tlcp", config.ProtocolTLCP, tlcpSite, GMCapableTLCP},
			{"tlcp, site says tls", config.ProtocolTLCP, tlsSetting, GMCapableRefused},
			{"tlcp, no site for the name", config.ProtocolTLCP, otherName, GMCapableRefused},
			{"tls listener", config.ProtocolTLS, tlcpSite, ""},
		} {
			rc := &ReplayConn{Prefix: wire}
			ch := classifyGMCapable(tc.protocol, tc.sites, WireTLS, rc)
			if ch.outcome != tc.want {
				t.Errorf("%s, %s: outcome %q, want %q", file, tc.name, ch.outcome, tc.want)
			}
			wantWire := WireTLS
			if tc.want == GMCapableTLCP {
				wantWire = WireTLCP
			}
			if got := ch.wire(WireTLS); got != wantWire {
				t.Errorf("%s, %s: wire %s, want %s", file, tc.name, got, wantWire)
			}
			if len(rc.Prefix) != len(wire) {
				t.Errorf("%s, %s: the classification consumed the replayed bytes", file, tc.name)
			}
		}
	}

	// Not GM-capable: a TLS hello without TLCP suites, a TLCP hello, bytes
	// that are no hello, and a connection that replays nothing.
	plain := gmHello(t, "chromium86-no-gm.hex")
	for _, tc := range []struct {
		name     string
		detected WireProtocol
		prefix   []byte
	}{
		{"TLS hello without TLCP suites", WireTLS, plain},
		{"first record TLCP", WireTLCP, gmHello(t, "360-chromium86-gm-last.hex")},
		{"truncated hello", WireTLS, gmHello(t, "360-chromium86-gm-last.hex")[:100]},
		{"nothing replayed", WireTLS, nil},
	} {
		for _, protocol := range []string{config.ProtocolAuto, config.ProtocolTLCP} {
			ch := classifyGMCapable(protocol, tlcpSite, tc.detected, &ReplayConn{Prefix: tc.prefix})
			if ch.outcome != "" || ch.wire(tc.detected) != tc.detected {
				t.Errorf("%s on %s: outcome %q", tc.name, protocol, ch.outcome)
			}
		}
	}
}

// BenchmarkClassifyGMCapable is what every TLS hello on a tlcp or auto
// listener now costs before its handshake: a parse of the bytes read.
func BenchmarkClassifyGMCapable(b *testing.B) {
	sites := route.NewSiteTable([]*route.Site{{Name: "gm", Hosts: []string{"server.test"}, TLCP: &tlcp.Config{}, GMCapableTLCP: true}})
	for _, file := range []string{"360-chromium86-gm-last.hex", "chromium86-no-gm.hex"} {
		b.Run(file, func(b *testing.B) {
			wire := gmHello(b, file)
			b.ReportAllocs()
			for b.Loop() {
				_ = classifyGMCapable(config.ProtocolAuto, sites, WireTLS, &ReplayConn{Prefix: wire})
			}
		})
	}
}

package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
)

// TestFailedReloadKeepsSessions: a reload that fails (here on a port in
// use) leaves the running TLCP session cache and TLS ticket keys as they
// were, even when the refused configuration changes their settings, so
// that reloading the configuration in service afterwards still resumes
// the sessions made before.
func TestFailedReloadKeepsSessions(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	s := startServer(t, testConfig(p, up.URL), nil)

	cache := tlcp.NewLRUClientSessionCache(4, 0)
	if tlcpResumes(t, p, s, cache) {
		t.Fatal("the first TLCP handshake resumed")
	}
	if !tlcpResumes(t, p, s, cache) {
		t.Fatal("the second TLCP handshake did not resume")
	}
	tcache := tls.NewLRUClientSessionCache(4)
	if tlsResumes(t, p, s, tcache) {
		t.Fatal("the first TLS handshake resumed")
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := testConfig(p, up.URL)
	bad.Listeners[0].TLCP.SessionCache = &config.SessionCache{Lifetime: config.Duration(time.Minute)}
	other := bad.Listeners[0]
	other.Name, other.Listen = "other", busy.Addr().String()
	other.TLCP = &config.TLCP{SignCert: p.dual.SignCert, SignKey: p.dual.SignKey, EncCert: p.dual.EncCert, EncKey: p.dual.EncKey}
	other.TLS = nil
	other.Protocol = config.ProtocolTLCP
	bad.Listeners = append(bad.Listeners, other)
	config.Defaults(bad)
	if err := s.Reload(bad); err == nil {
		t.Fatal("a reload onto a port in use succeeded")
	}
	if !tlcpResumes(t, p, s, cache) {
		t.Fatal("after the failed reload a TLCP session did not resume")
	}

	if err := s.Reload(testConfig(p, up.URL)); err != nil {
		t.Fatal(err)
	}
	if !tlcpResumes(t, p, s, cache) {
		t.Fatal("after reloading the configuration in service a TLCP session made before the failed reload did not resume")
	}
	if !tlsResumes(t, p, s, tcache) {
		t.Fatal("after reloading the configuration in service a TLS ticket issued before the failed reload did not resume")
	}
}

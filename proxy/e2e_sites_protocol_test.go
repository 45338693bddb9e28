package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// siteBody sends GET / with Host over conn and returns the status and
// body of the answer.
func siteBody(t *testing.T, conn net.Conn, host string) (int, string) {
	t.Helper()
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(t, resp)
}

// TestSiteOfTheOtherProtocol: a request for a site that has no identity
// in the connection's protocol is answered 421 with words that say so
// (a new connection of the same protocol would get the same answer),
// over TLCP for a TLS-only site and over TLS for a TLCP-only one; a
// request for a site that does serve the protocol is still told to open
// a new connection.
func TestSiteOfTheOtherProtocol(t *testing.T) {
	sc := getSiteCerts(t)
	cfg := siteConfig(t, true, siteUpstreams(t))
	sites := cfg.Listeners[0].Sites
	sites[1].TLCP = nil // www: TLS only
	sites[2].TLS = nil  // pay: TLCP only
	s := startServer(t, cfg, nil)

	for _, tc := range []struct {
		name string
		dial func() net.Conn
		host string
		want string
	}{
		{"TLCP for a TLS-only site", func() net.Conn { return mustTLCPSite(t, s, "") }, "www.example.cn",
			"www.example.cn is not served over TLCP, only over TLS (its site www has no tlcp identity); this TLCP connection was made for site api"},
		{"TLS for a TLCP-only site", func() net.Conn { return mustTLSSite(t, s, sc, "api.example.cn") }, "pay.example.cn",
			"pay.example.cn is not served over TLS, only over TLCP (its site pay has no tls identity); this TLS connection was made for site api"},
		{"TLCP for another TLCP site", func() net.Conn { return mustTLCPSite(t, s, "") }, "pay.example.cn",
			"this connection was made for another site; open a new one to pay.example.cn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := siteBody(t, tc.dial(), tc.host)
			if status != http.StatusMisdirectedRequest || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %q, want 421 with %q", status, body, tc.want)
			}
		})
	}
}

func mustTLCPSite(t *testing.T, s *Server, sni string) net.Conn {
	t.Helper()
	c, err := dialTLCPSite(t, s, sni, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustTLSSite(t *testing.T, s *Server, sc *siteCerts, sni string) net.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: sc.tlsRoots, ServerName: sni})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

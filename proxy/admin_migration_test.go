package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/gmgate/gmgate/tlcp/tls13"
)

// The admin API's migration view counts TLS 1.3 ShangMi connections
// (protocol tls1.3-sm) as GM, like TLCP, and standard TLS as not: one
// connection and request of each through a served gateway.
func TestAdminMigrationCountsShangMiAsGM(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	s := startServer(t, testConfig(p, up.URL), nil)
	mustServeTLCP(t, p, s)
	if e := getEchoed(t, newShangMiClient(t, p, &tls13.Config{}).Client, gatewayURL(s, "/")); e.Headers.Get("X-Tlcp-Protocol") != "tls1.3-sm" {
		t.Fatalf("upstream saw protocol %q", e.Headers.Get("X-Tlcp-Protocol"))
	}
	resp, err := tlsClient(t, p).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)

	resp, err = http.Get("http://" + s.AdminAddr().String() + "/api/v1/migration")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("migration: %d %v", resp.StatusCode, err)
	}
	var mv struct {
		Sites []struct {
			Site    string `json:"site"`
			Windows []struct {
				Minutes       int     `json:"minutes"`
				Connections   int     `json:"connections"`
				GMConnections int     `json:"gm_connections"`
				GMRequests    int     `json:"gm_requests"`
				Requests      int     `json:"requests"`
				GMShare       float64 `json:"gm_share"`
				BySuite       []struct {
					Protocol    string `json:"protocol"`
					Suite       string `json:"suite"`
					GM          bool   `json:"gm"`
					Connections int    `json:"connections"`
				} `json:"by_suite"`
			} `json:"windows"`
		} `json:"sites"`
	}
	if err := json.Unmarshal(body, &mv); err != nil {
		t.Fatal(err)
	}
	if len(mv.Sites) != 1 || len(mv.Sites[0].Windows) != 3 {
		t.Fatalf("migration: %s", body)
	}
	w := mv.Sites[0].Windows[1] // 15 minutes: all of the test's traffic
	if w.Connections != 3 || w.GMConnections != 2 || w.Requests != 3 || w.GMRequests != 2 {
		t.Errorf("15 minutes: %d connections (%d GM), %d requests (%d GM); want 3 (2), 3 (2)\n%s", w.Connections, w.GMConnections, w.Requests, w.GMRequests, body)
	}
	gm := map[string]bool{}
	for _, b := range w.BySuite {
		gm[b.Protocol] = b.GM
	}
	if !gm["tls1.3-sm"] || !gm["tlcp"] || gm["tls1.3"] {
		t.Errorf("GM by protocol: %v\n%s", gm, body)
	}
}

package proxy

// Client mode end to end, the client profiles: the hint of a refused
// handshake names the profile to change to, and profile: auto finds
// which one a target takes.

import (
	"bufio"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testgmssl"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/tlcp"
)

// gmsslPeer is a TLCP server that asks for a client certificate from the
// test CA and refuses the standard profile's answer as a GmSSL 3 server
// does (testgmssl); it answers each request "gmssl-peer" and counts the
// connections it took.
func gmsslPeer(t *testing.T, p *testPKI) (addr string, conns *atomic.Int64) {
	t.Helper()
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := smx509.NewCertPool()
	roots.AddCert(p.ca.Root)
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{*cert}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: roots}
	conns = &atomic.Int64{}
	addr = testnet.Serve(t, func(c net.Conn) {
		conns.Add(1)
		tc := tlcp.Server(testgmssl.Conn(c), cfg)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		defer tc.Close()
		if _, err := http.ReadRequest(bufio.NewReader(tc)); err != nil {
			return
		}
		_, _ = tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\ngmssl-peer"))
	})
	return addr, conns
}

// gaugeValue is the value of the gauge series whose labels include the
// given ones (-1 when there is none).
func gaugeValue(t testing.TB, s *Server, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := scrape(t, s)[name]
	if !ok {
		return -1
	}
	for _, m := range f.Metric {
		if hasLabels(m, labels) {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestOutboundProfileHint: a target that refuses the client's answer to
// its CertificateRequest gets a hint that names the profile set and the
// one to try: under gmssl (towards a standard-profile peer that does not
// trust the certificate), profile: standard, and not gmssl again; under
// standard towards a GmSSL-style peer, profile: gmssl.
func TestOutboundProfileHint(t *testing.T) {
	p := getPKI(t)
	otherCA, err := pki.NewCA(pki.CAOptions{Subject: pkix.Name{CommonName: "some other CA"}})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := otherCA.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "stranger"}})
	if err != nil {
		t.Fatal(err)
	}
	strangerFiles, err := stranger.Write(tempDir(t), "stranger", nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := clientIdentity(t, p)
	svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
	peer, _ := gmsslPeer(t, p)
	for _, tc := range []struct {
		name, target, section string
		want, not             string
	}{
		{"gmssl towards a standard peer", svc.Addr("edge").String(), identitySection(p, strangerFiles, "ECC_SM4_GCM_SM3") + "\nprofile: gmssl",
			"refused the answer of profile gmssl, which only GmSSL 3 servers take: for Tongsuo, gotlcp, gmgate and most servers use profile: standard", "needs profile: gmssl"},
		{"standard towards a GmSSL peer", peer, identitySection(p, id, "ECC_SM4_GCM_SM3"),
			"refused the answer of profile standard: check that it trusts the issuer of tlcp.sign_cert; a GmSSL 3 server needs profile: gmssl", "use profile: standard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+tc.target), tc.section, "retries: 0")
			resp, body := get(t, &http.Client{Timeout: 20 * time.Second}, "http://"+gw.Addr("app").String()+"/")
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			line := logLine(logs, "upstream failed", map[string]string{"stage": "handshake"})
			if line == nil {
				t.Fatalf("no failure line:\n%s", logs)
			}
			hint := fmt.Sprint(line["hint"])
			if !strings.Contains(hint, tc.want) || strings.Contains(hint, tc.not) {
				t.Fatalf("hint %q\nwant %q, without %q", hint, tc.want, tc.not)
			}
		})
	}
}

// TestOutboundProfileAuto: profile: auto reaches a GmSSL-style peer in
// an ECC and an ECDHE suite: the standard profile is refused, the gmssl
// one taken and remembered (the next connection makes one handshake),
// said once in the log and in gmgate_upstream_tlcp_profile; towards a
// standard peer it stays with standard at one handshake a connection.
func TestOutboundProfileAuto(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	client := &http.Client{Timeout: 20 * time.Second}
	for _, suite := range []string{"ECC_SM4_GCM_SM3", "ECDHE_SM4_GCM_SM3"} {
		t.Run(suite, func(t *testing.T) {
			peer, conns := gmsslPeer(t, p)
			gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+peer), identitySection(p, id, suite)+"\nprofile: auto", "retries: 0")
			url := "http://" + gw.Addr("app").String() + "/"
			for i, want := range []int64{2, 3} {
				resp, body := get(t, client, url)
				if resp.StatusCode != http.StatusOK || body != "gmssl-peer" {
					t.Fatalf("request %d: %d %q\n%s", i, resp.StatusCode, body, logs)
				}
				if n := conns.Load(); n != want {
					t.Fatalf("after request %d the peer took %d connections, want %d", i, n, want)
				}
			}
			if n := strings.Count(logs.String(), "upstream target takes TLCP client profile gmssl"); n != 1 {
				t.Errorf("%d lines say the target takes gmssl, want 1:\n%s", n, logs)
			}
			labels := map[string]string{"upstream": "partner", "target": peer}
			for profile, want := range map[string]float64{"gmssl": 1, "standard": 0} {
				labels["profile"] = profile
				if v := gaugeValue(t, gw, "gmgate_upstream_tlcp_profile", labels); v != want {
					t.Errorf("gmgate_upstream_tlcp_profile%v = %v, want %v", labels, v, want)
				}
			}
		})
	}
	t.Run("standard peer", func(t *testing.T) {
		svc := tlcpService(t, p, echoUpstream(t, "partner-api").URL)
		gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, "ECC_SM4_GCM_SM3")+"\nprofile: auto", "")
		if resp, body := get(t, client, "http://"+gw.Addr("app").String()+"/"); !strings.Contains(body, "partner-api") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if v := counterSum(t, gw, "gmgate_upstream_failures_total", nil); v != 0 {
			t.Errorf("%v failures", v)
		}
		if !strings.Contains(logs.String(), "upstream target takes TLCP client profile standard") {
			t.Errorf("the log does not say the target takes standard:\n%s", logs)
		}
		labels := map[string]string{"upstream": "partner", "target": svc.Addr("edge").String(), "profile": "standard"}
		if v := gaugeValue(t, gw, "gmgate_upstream_tlcp_profile", labels); v != 1 {
			t.Errorf("gmgate_upstream_tlcp_profile%v = %v", labels, v)
		}
	})
}

package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// shangMiClient is an HTTP client that speaks TLS 1.3 ShangMi to the
// gateway, one connection per request, and the states of its handshakes.
type shangMiClient struct {
	*http.Client
	mu     sync.Mutex
	states []tls13.ConnectionState
}

func newShangMiClient(t testing.TB, p *testPKI, cfg *tls13.Config) *shangMiClient {
	t.Helper()
	if cfg.RootCAs == nil {
		cfg.RootCAs = p.roots
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "localhost"
	}
	c := &shangMiClient{}
	d := &tls13.Dialer{Config: cfg}
	tr := &http.Transport{DisableKeepAlives: true, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.states = append(c.states, conn.(*tls13.Conn).ConnectionState())
		c.mu.Unlock()
		return conn, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c.Client = &http.Client{Transport: tr}
	return c
}

func (c *shangMiClient) last() tls13.ConnectionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[len(c.states)-1]
}

func requireHybrid(t testing.TB) {
	if runtime.GOARCH == "arm64" && !cpu.ARM64.HasASIMDRDM {
		t.Skip("gmsm's ML-KEM needs ARMv8.1 on arm64")
	}
}

// ecdsaClientCA writes an ECDSA CA for the tls section's client
// certificates and returns it with its file.
func ecdsaClientCA(t testing.TB, dir string) (*pki.CA, string) {
	t.Helper()
	ca, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tls-client-ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, file
}

// getEchoed sends GET path and returns what the upstream saw.
func getEchoed(t testing.TB, client *http.Client, url string) echoed {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	if err := json.Unmarshal([]byte(readAll(t, resp)), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// accessLine returns the access log line of the request for path.
func accessLine(t testing.TB, access *testlog.Buffer, path string) map[string]any {
	t.Helper()
	var found map[string]any
	testwait.For(t, "access log line for "+path, func() bool {
		for _, text := range strings.Split(access.String(), "\n") {
			var line map[string]any
			if json.Unmarshal([]byte(text), &line) == nil && line["path"] == path {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

// An auto listener serves TLCP, standard TLS 1.3 and TLS 1.3 ShangMi
// (RFC 8998) on one port: each client's request reaches the upstream
// with the protocol it spoke, with and without a client certificate,
// over a full handshake and then a resumed one, and the ShangMi clients
// over curveSM2 and the SM2-ML-KEM hybrid.
func TestAutoPortServesShangMiTLS13(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	tlsCA, tlsCAFile := ecdsaClientCA(t, tempDir(t))
	cfg := testConfig(p, up.URL)
	l := &cfg.Listeners[0]
	l.TLCP.ClientAuth, l.TLCP.ClientCA = "verify_if_given", p.dual.CACert
	l.TLS.ClientAuth, l.TLS.ClientCA = "verify_if_given", tlsCAFile
	var access testlog.Buffer
	s := startServer(t, cfg, slog.New(slog.NewJSONHandler(&access, nil)))

	smPair, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "sm-client"}})
	if err != nil {
		t.Fatal(err)
	}
	smCert := tls13.Certificate{Certificate: [][]byte{smPair.SignCert.Raw}, PrivateKey: smPair.SignKey}
	tlsLeaf, err := tlsCA.IssueTLS(pki.IssueOptions{Subject: pkix.Name{CommonName: "tls-client"}, DNSNames: []string{"client.test"}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCert, err := tlsLeaf.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}

	type kase struct {
		name    string
		proto   string
		subject string // the client certificate's subject, "" for none
		client  func() (*http.Client, func(t *testing.T, resumed bool))
	}
	var cases []kase
	for _, withCert := range []bool{false, true} {
		suffix, smSubject, tlsSubject := "", "", ""
		if withCert {
			suffix, smSubject, tlsSubject = "+cert", "CN=sm-client", "CN=tls-client"
		}
		cases = append(cases,
			kase{"tlcp" + suffix, "tlcp", smSubject, func() (*http.Client, func(*testing.T, bool)) {
				tc := &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", ClientSessionCache: tlcp.NewLRUClientSessionCache(4, time.Hour)}
				if withCert {
					tc.Certificates = []tlcp.Certificate{*smPair.Certificate()}
				}
				c := tlcpClient(t, p, tc)
				c.Transport.(*http.Transport).DisableKeepAlives = true
				return c, nil
			}},
			kase{"tls1.3" + suffix, "tls1.3", tlsSubject, func() (*http.Client, func(*testing.T, bool)) {
				tc := &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", MinVersion: tls.VersionTLS13, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
				if withCert {
					tc.Certificates = []tls.Certificate{*tlsCert}
				}
				tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
				t.Cleanup(tr.CloseIdleConnections)
				return &http.Client{Transport: tr}, nil
			}},
		)
		for _, group := range []tls13.CurveID{tls13.CurveSM2, tls13.CurveSM2MLKEM768} {
			cases = append(cases, kase{"tls1.3-sm/" + group.String() + suffix, "tls1.3-sm", smSubject, func() (*http.Client, func(*testing.T, bool)) {
				if group == tls13.CurveSM2MLKEM768 {
					requireHybrid(t)
				}
				tc := &tls13.Config{CurvePreferences: []tls13.CurveID{group}, ClientSessionCache: tls13.NewLRUClientSessionCache(4)}
				if withCert {
					tc.Certificates = []tls13.Certificate{smCert}
				}
				c := newShangMiClient(t, p, tc)
				return c.Client, func(t *testing.T, resumed bool) {
					st := c.last()
					if st.Group != group || st.DidResume != resumed || st.DidHelloRetryRequest || st.CipherSuite != tls13.TLS_SM4_GCM_SM3 {
						t.Errorf("client state: group %s, resumed %v, retry %v, suite %s", st.Group, st.DidResume, st.DidHelloRetryRequest, tls13.CipherSuiteName(st.CipherSuite))
					}
				}
			}})
		}
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, check := tc.client()
			for j, resumed := range []bool{false, true} {
				path := fmt.Sprintf("/case-%d-%d", i, j)
				e := getEchoed(t, client, gatewayURL(s, path))
				if got := e.Headers.Get("X-Tlcp-Protocol"); got != tc.proto {
					t.Errorf("request %d: upstream saw protocol %q, want %q", j, got, tc.proto)
				}
				if got := e.Headers.Get("X-Tlcp-Resumed"); got != fmt.Sprint(resumed) {
					t.Errorf("request %d: upstream saw resumed %q, want %v", j, got, resumed)
				}
				if got := e.Headers.Get("X-Client-Subject"); got != tc.subject {
					t.Errorf("request %d: upstream saw client subject %q, want %q", j, got, tc.subject)
				}
				if check != nil {
					check(t, resumed)
				}
				line := accessLine(t, &access, path)
				if line["protocol"] != tc.proto || line["resumed"] != resumed {
					t.Errorf("access log: %v", line)
				}
				if tc.proto == "tls1.3-sm" {
					if want := strings.TrimSuffix(strings.TrimPrefix(tc.name, "tls1.3-sm/"), "+cert"); line["group"] != want || line["suite"] != "TLS_SM4_GCM_SM3" {
						t.Errorf("access log group %v suite %v, want %s", line["group"], line["suite"], want)
					}
				}
			}
		})
	}

	mf := scrape(t, s)
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"gmgate_handshakes_total", map[string]string{"protocol": "tls1.3-sm", "suite": "TLS_SM4_GCM_SM3", "result": "ok"}, 8},
		{"gmgate_handshakes_resumed_total", map[string]string{"protocol": "tls1.3-sm"}, 4},
		{"gmgate_handshake_groups_total", map[string]string{"protocol": "tls1.3-sm", "group": "curveSM2"}, 4},
	} {
		if v, ok := metricValue(mf, want.name, want.labels); !ok || v != want.value {
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, v, want.value)
		}
	}
}

// A client whose first key share is one the site does not take (its
// tls13_groups lists the hybrid only) is asked for another with a
// HelloRetryRequest, and is served; its ticket then resumes.
func TestShangMiHelloRetryRequest(t *testing.T) {
	requireHybrid(t)
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].TLCP.TLS13Groups = []string{"curveSM2MLKEM768"}
	s := startServer(t, cfg, nil)

	c := newShangMiClient(t, p, &tls13.Config{
		CurvePreferences:   []tls13.CurveID{tls13.CurveSM2, tls13.CurveSM2MLKEM768},
		ClientSessionCache: tls13.NewLRUClientSessionCache(4),
	})
	for _, resumed := range []bool{false, true} {
		e := getEchoed(t, c.Client, gatewayURL(s, "/"))
		st := c.last()
		if e.Headers.Get("X-Tlcp-Protocol") != "tls1.3-sm" || !st.DidHelloRetryRequest || st.Group != tls13.CurveSM2MLKEM768 || st.DidResume != resumed {
			t.Errorf("protocol %q, state %+v", e.Headers.Get("X-Tlcp-Protocol"), st)
		}
	}

	// A client that supports none of the site's groups is refused.
	only := newShangMiClient(t, p, &tls13.Config{CurvePreferences: []tls13.CurveID{tls13.CurveSM2}})
	if _, err := only.Get(gatewayURL(s, "/")); err == nil {
		t.Error("a client without the hybrid group was served")
	}
}

// tls13_shangmi: off leaves a ShangMi-only client to crypto/tls, which
// cannot serve it.
func TestShangMiOff(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].TLCP.TLS13ShangMi = config.TLS13ShangMiOff
	s := startServer(t, cfg, nil)
	c := newShangMiClient(t, p, &tls13.Config{})
	if _, err := c.Get(gatewayURL(s, "/")); err == nil {
		t.Error("a TLS 1.3 ShangMi client was served with tls13_shangmi: off")
	}
	mustServeTLCP(t, p, s)
}

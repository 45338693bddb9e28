package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
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

	"github.com/alicebob/miniredis/v2"
	"golang.org/x/sys/cpu"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
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
	if !hybridAvailable() {
		t.Skip("gmsm's ML-KEM needs ARMv8.1 on arm64")
	}
}

// hybridAvailable says whether this CPU runs curveSM2MLKEM768 (tls13
// leaves it out on ARMv8.0).
func hybridAvailable() bool {
	return runtime.GOARCH != "arm64" || cpu.ARM64.HasASIMDRDM
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
		groups := []tls13.CurveID{tls13.CurveSM2, tls13.CurveSM2MLKEM768}
		if !hybridAvailable() {
			groups = groups[:1]
		}
		for _, group := range groups {
			cases = append(cases, kase{"tls1.3-sm/" + group.String() + suffix, "tls1.3-sm", smSubject, func() (*http.Client, func(*testing.T, bool)) {
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

	if !hybridAvailable() {
		t.Log("curveSM2MLKEM768 left out: gmsm's ML-KEM needs ARMv8.1 on arm64")
	}
	smCases := 0
	for _, c := range cases {
		if c.proto == "tls1.3-sm" {
			smCases++
		}
	}
	mf := scrape(t, s)
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"gmgate_handshakes_total", map[string]string{"protocol": "tls1.3-sm", "suite": "TLS_SM4_GCM_SM3", "result": "ok"}, float64(2 * smCases)},
		{"gmgate_handshakes_resumed_total", map[string]string{"protocol": "tls1.3-sm"}, float64(smCases)},
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

// A TLS 1.3 ShangMi client that chooses h2 by ALPN speaks HTTP/2.
func TestShangMiHTTP2(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	var access testlog.Buffer
	s := startServer(t, testConfig(p, up.URL), slog.New(slog.NewJSONHandler(&access, nil)))
	var mu sync.Mutex
	var chosen []string
	tr := &http.Transport{Protocols: &http.Protocols{}, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &tls13.Dialer{Config: &tls13.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"h2"}}}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		chosen = append(chosen, c.(*tls13.Conn).ConnectionState().NegotiatedProtocol)
		mu.Unlock()
		return c, nil
	}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tlcpRoundTripper{tr}}
	resp, err := client.Get(gatewayURL(s, "/over-h2"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	mu.Lock()
	defer mu.Unlock()
	if resp.ProtoMajor != 2 || len(chosen) != 1 || chosen[0] != "h2" {
		t.Fatalf("response over %s, ALPN %q", resp.Proto, chosen)
	}
	if line := accessLine(t, &access, "/over-h2"); line["http"] != "HTTP/2.0" || line["protocol"] != "tls1.3-sm" {
		t.Errorf("access log: %v", line)
	}
}

// smResumes sends a request to s over TLS 1.3 ShangMi with cache and
// reports whether the handshake resumed.
func smResumes(t *testing.T, p *testPKI, s *Server, cfg *tls13.Config) bool {
	t.Helper()
	c := newShangMiClient(t, p, cfg)
	getEchoed(t, c.Client, gatewayURL(s, "/"))
	return c.last().DidResume
}

// TLS 1.3 ShangMi tickets resume on another replica with
// shared_sessions (their keys derive from the session store's), not on a
// replica without it, survive a reload, and stop resuming when the
// site's client certificate policy changes.
func TestShangMiTicketsAcrossReplicas(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	mr := miniredis.RunT(t)
	keys := writeKeys(t, tempDir(t), "keys", testSealKey1)
	s1 := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)
	s2 := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)
	private := sharedConfig(p, up, mr.Addr(), keys)
	private.Listeners[0].SharedSessions = false
	s3 := startServer(t, private, nil)

	cfg := &tls13.Config{ClientSessionCache: tls13.NewLRUClientSessionCache(4)}
	if smResumes(t, p, s1, cfg) {
		t.Fatal("the first handshake resumed")
	}
	if !smResumes(t, p, s2, cfg) {
		t.Fatal("a ticket from replica 1 did not resume on replica 2")
	}
	if smResumes(t, p, s3, cfg) {
		t.Fatal("a listener without shared_sessions resumed another replica's ticket")
	}
	// s3's own ticket resumes on s3 after a reload of the same
	// configuration: its key is kept.
	if err := s3.Reload(private); err != nil {
		t.Fatal(err)
	}
	if !smResumes(t, p, s3, cfg) {
		t.Fatal("a ticket did not resume after a reload")
	}
	// A stricter client certificate policy: the ticket made under the
	// laxer one does not resume.
	strict := sharedConfig(p, up, mr.Addr(), keys)
	strict.Listeners[0].SharedSessions = false
	strict.Listeners[0].TLCP.ClientAuth, strict.Listeners[0].TLCP.ClientCA = "verify_if_given", p.dual.CACert
	if err := s3.Reload(strict); err != nil {
		t.Fatal(err)
	}
	if smResumes(t, p, s3, cfg) {
		t.Fatal("a ticket made without client authentication resumed under verify_if_given")
	}
}

// fragmentingConn splits the records of its first write into records of
// at most size bytes, as a client that sends its ClientHello in many
// records does.
type fragmentingConn struct {
	net.Conn
	size int
	done bool
}

func (c *fragmentingConn) Write(b []byte) (int, error) {
	if c.done {
		return c.Conn.Write(b)
	}
	c.done = true
	var out []byte
	for rest := b; len(rest) >= 5; {
		n := int(rest[3])<<8 | int(rest[4])
		out = append(out, records([2]byte{rest[1], rest[2]}, rest[5:5+n], c.size)...)
		rest = rest[5+n:]
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Hostile and unusual first flights of TLS 1.3 ShangMi clients: a hello
// split into many records is served; a malformed record after the hello
// ends the handshake with an alert; a client that stops after its hello
// is cut off at the handshake timeout; none of them leaks a goroutine
// (TestMain checks).
func TestShangMiHostileFirstFlights(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Handshake = config.Duration(time.Second)
	s := startServer(t, cfg, nil)
	addr := s.Addr("edge").String()
	result := func(r string) float64 {
		v, _ := metricValue(scrape(t, s), "gmgate_handshakes_total", map[string]string{"protocol": "tls1.3-sm", "result": r})
		return v
	}

	t.Run("hello in many records", func(t *testing.T) {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		c := tls13.Client(&fragmentingConn{Conn: raw, size: 16}, &tls13.Config{RootCAs: p.roots, ServerName: "localhost", CurvePreferences: []tls13.CurveID{tls13.CurveSM2}})
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		if st := c.ConnectionState(); st.Group != tls13.CurveSM2 {
			t.Fatalf("state %+v", st)
		}
	})

	// The first flight of a ShangMi client, as records.
	hello := func(t *testing.T) []byte {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			defer b.Close()
			_ = tls13.Client(b, &tls13.Config{RootCAs: p.roots, ServerName: "localhost"}).Handshake()
		}()
		_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, h, err := edge.ReadClientHello(a, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	t.Run("malformed record after the hello", func(t *testing.T) {
		before := result("alert_sent_unexpected_message") + result("alert_sent_bad_record_MAC") + result("alert_sent_decode_error")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A handshake record where the client's protected Finished
		// should come, with a body that is no handshake message.
		flight := append(hello(t), 22, 3, 3, 0, 3, 0xff, 0xff, 0xff)
		if _, err := c.Write(flight); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("the server did not close the connection: %v", err)
		}
		testwait.For(t, "the handshake counted as failed with an alert", func() bool {
			return result("alert_sent_unexpected_message")+result("alert_sent_bad_record_MAC")+result("alert_sent_decode_error") > before
		})
	})

	t.Run("silent after the hello", func(t *testing.T) {
		before := result("timeout")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(hello(t)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("the server did not close the connection: %v", err)
		}
		testwait.For(t, "the handshake counted as timed out", func() bool { return result("timeout") > before })
	})
}

// A keep-alive TLS 1.3 ShangMi connection that stays idle is parked and
// served again on its next request, also after a KeyUpdate from the
// client that asks the server to update its keys too.
func TestShangMiIdleConnectionParks(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	s := startServer(t, testConfig(p, up.URL), nil)
	conn, err := tls13.Dial("tcp", s.Addr("edge").String(), &tls13.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{t: t, conn: conn, br: bufio.NewReader(conn)}
	c.get(getRequest, 1)
	testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
	c.get(getRequest, 1)
	testwait.For(t, "the connection to be parked again", func() bool { return parkedCount(s) == 1 })
	if err := conn.KeyUpdate(true); err != nil {
		t.Fatal(err)
	}
	c.get(getRequest+getRequest, 2)
	testwait.For(t, "the connection to be parked again", func() bool { return parkedCount(s) == 1 })
}

// dialShangMiSite makes a TLS 1.3 ShangMi connection for the server name
// sni.
func dialShangMiSite(t *testing.T, s *Server, sni string, certs ...tls13.Certificate) (*tls13.Conn, error) {
	t.Helper()
	return tls13.Dial("tcp", s.Addr("edge").String(), &tls13.Config{RootCAs: getPKI(t).roots, ServerName: sni, Certificates: certs})
}

// On an auto listener with sites, a ShangMi client reaches the site its
// server name selects when that site has an SM2 identity (a TLCP-only
// site included, with its client authentication), not one whose site has
// none; a request on such a connection for a site without an SM2
// identity is answered 421 with words that say so.
func TestShangMiSites(t *testing.T) {
	p := getPKI(t)
	cfg := siteConfig(t, true, siteUpstreams(t))
	sites := cfg.Listeners[0].Sites
	sites[1].TLCP = nil // www: TLS only
	sites[2].TLS = nil  // pay: TLCP only, require_and_verify
	s := startServer(t, cfg, nil)
	pair, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "payer"}})
	if err != nil {
		t.Fatal(err)
	}
	payer := tls13.Certificate{Certificate: [][]byte{pair.SignCert.Raw}, PrivateKey: pair.SignKey}

	conn, err := dialShangMiSite(t, s, "pay.example.cn", payer)
	if err != nil {
		t.Fatal(err)
	}
	if resp, upstream := siteGet(t, conn, "pay.example.cn"); resp.StatusCode != http.StatusCreated || upstream != "pay" {
		t.Fatalf("pay over TLS 1.3 ShangMi: %d from %q", resp.StatusCode, upstream)
	}
	// A TLS 1.3 client finishes its side before the server has checked
	// its certificate: the refusal comes as the first read's alert.
	if c, err := dialShangMiSite(t, s, "pay.example.cn"); err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: pay.example.cn\r\n\r\n")
		var ae *tls13.AlertError
		if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ae) || ae.Alert != tls13.AlertCertificateRequired {
			t.Errorf("pay without a client certificate: read %v, want certificate_required", err)
		}
		c.Close()
	}
	if _, err := dialShangMiSite(t, s, "www.example.cn"); err == nil {
		t.Error("www, which has no SM2 identity, served a ShangMi-only client")
	}
	for _, tc := range []struct{ sni, host, want string }{
		{"pay.example.cn", "www.example.cn", "www.example.cn is not served over TLS 1.3 ShangMi (its site www has no SM2 identity: neither tls.sm2 nor a tlcp section, or tls13_shangmi: off); this TLS 1.3 ShangMi connection was made for site pay"},
		{"api.example.cn", "pay.example.cn", "this connection was made for another site; open a new one to pay.example.cn"},
	} {
		conn, err := dialShangMiSite(t, s, tc.sni, payer)
		if err != nil {
			t.Fatal(err)
		}
		if status, body := siteBody(t, conn, tc.host); status != http.StatusMisdirectedRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s on a connection for %s: %d %q, want 421 with %q", tc.host, tc.sni, status, body, tc.want)
		}
	}
}

// An auto listener without a tls section serves TLCP and TLS 1.3
// ShangMi on one port (a port for GM clients only); a standard TLS client
// is refused.
func TestShangMiWithoutTLSSection(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].TLS = nil
	s := startServer(t, cfg, nil)
	mustServeTLCP(t, p, s)
	if e := getEchoed(t, newShangMiClient(t, p, &tls13.Config{}).Client, gatewayURL(s, "/")); e.Headers.Get("X-Tlcp-Protocol") != "tls1.3-sm" {
		t.Errorf("upstream saw protocol %q", e.Headers.Get("X-Tlcp-Protocol"))
	}
	if _, err := tlsClient(t, p).Get(gatewayURL(s, "/")); err == nil {
		t.Error("a standard TLS client was served by a listener without a tls section")
	}
}

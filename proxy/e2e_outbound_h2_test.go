package proxy

// HTTP/2 over TLCP to tlcp:// upstreams with http2: true: a local
// HTTP/1.1 client's requests reach a TLCP service as HTTP/2 when the
// service chooses h2 by ALPN, multiplexed over one TLCP connection, and as
// HTTP/1.1 when it does not.

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TestOutboundHTTP2OverTLCP: the service's gateway (a TLCP listener that
// offers h2) sees HTTP/2 from the client gateway; n requests in flight at
// once travel over one TLCP connection; a new connection resumes the
// session; client authentication holds throughout.
func TestOutboundHTTP2OverTLCP(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	const n = 16
	var arrived atomic.Int64
	together := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/together" {
			// Every request waits for the others: they are in flight
			// at once.
			if arrived.Add(1) == n {
				close(together)
			}
			select {
			case <-together:
			case <-time.After(15 * time.Second):
				http.Error(w, "the requests did not arrive together", http.StatusGatewayTimeout)
				return
			}
		}
		fmt.Fprintf(w, "%s %s %s from %s", r.Method, r.URL.Path, body, r.Header.Get("X-Client-Subject"))
	}))
	t.Cleanup(app.Close)
	svc := tlcpService(t, p, app.URL)
	gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+svc.Addr("edge").String()), identitySection(p, id, "ECC_SM4_GCM_SM3"), "http2: true")
	client := &http.Client{Timeout: 30 * time.Second}
	url := "http://" + gw.Addr("app").String()

	post := func(path, body string) error {
		resp, err := client.Post(url+path, "text/plain", strings.NewReader(body))
		if err != nil {
			return err
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "POST " + path + " " + body + " from CN=legacy-app"; err != nil || resp.StatusCode != http.StatusOK || string(got) != want {
			return fmt.Errorf("%s: %d %q (%v), want %q", path, resp.StatusCode, got, err, want)
		}
		return nil
	}
	if err := post("/first", "hello"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := post("/together", fmt.Sprintf("request %d", i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	mf := scrape(t, svc)
	if v, _ := metricValue(mf, "gmgate_request_duration_seconds", map[string]string{"http_version": "2"}); v != n+1 {
		t.Errorf("the service gateway saw %v HTTP/2 requests, want %d", v, n+1)
	}
	if v, _ := metricValue(mf, "gmgate_request_duration_seconds", map[string]string{"http_version": "1.1"}); v != 0 {
		t.Errorf("the service gateway saw %v HTTP/1.1 requests", v)
	}
	served := counterSum(t, svc, "gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "result": "ok"})
	made := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner"})
	if served != 1 || made != 1 {
		t.Fatalf("%d requests over %v handshakes (the service counted %v), want one connection", n+1, made, served)
	}
	if logLine(logs, "upstream target speaks HTTP/2", map[string]string{"target": svc.Addr("edge").String()}) == nil {
		t.Errorf("no log line for the version chosen:\n%s", logs)
	}

	// A new connection resumes the session, and speaks HTTP/2 again.
	gw.current().pools["partner"].Transport.CloseIdle()
	if err := post("/again", "resumed"); err != nil {
		t.Fatal(err)
	}
	if v := counterSum(t, gw, "gmgate_upstream_handshakes_total", map[string]string{"upstream": "partner", "resumed": "true"}); v != 1 {
		t.Errorf("client side: %v resumed handshakes, want 1", v)
	}
	if v := counterSum(t, svc, "gmgate_handshakes_resumed_total", map[string]string{"protocol": "tlcp"}); v != 1 {
		t.Errorf("service side: %v resumed handshakes, want 1", v)
	}
	if v, _ := metricValue(scrape(t, svc), "gmgate_request_duration_seconds", map[string]string{"http_version": "2"}); v != n+2 {
		t.Errorf("the service gateway saw %v HTTP/2 requests, want %d", v, n+2)
	}
}

// TestOutboundHTTP2HealthChecks: with http2, a health check's GET goes
// in HTTP/2 over the one connection the requests use, and a check without
// a path is a handshake that offers h2.
func TestOutboundHTTP2HealthChecks(t *testing.T) {
	p := getPKI(t)
	var checks, offered atomic.Int64
	addr, handshakes := alpnTarget(t, p, func(hi *tlcp.ClientHelloInfo) string {
		if len(hi.SupportedProtos) > 0 {
			offered.Add(1)
		}
		return "h2"
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && r.UserAgent() == "gmgate-health-check" && r.ProtoMajor == 2 {
			checks.Add(1)
		}
	}))
	target := fmt.Sprintf("%q", "tlcp://"+addr)
	section := "ca: " + p.dual.CACert + "\nserver_name: localhost"

	t.Run("path", func(t *testing.T) {
		clientGateway(t, "http", target, section, "http2: true\nhealth: {path: /healthz, interval: 50ms}")
		testwait.For(t, "health checks over HTTP/2", func() bool { return checks.Load() >= 3 })
		if v := handshakes.Load(); v != 1 {
			t.Errorf("%v handshakes for the checks, want 1", v)
		}
	})
	t.Run("handshake", func(t *testing.T) {
		before := offered.Load()
		_, logs := clientGateway(t, "http", target, section, "http2: true\nhealth: {interval: 50ms}")
		testwait.For(t, "handshake checks offering h2", func() bool { return offered.Load()-before >= 2 })
		if logLine(logs, "upstream target speaks HTTP/2", nil) == nil {
			t.Errorf("the check did not note the version:\n%s", logs)
		}
	})
}

// alpnTarget is a TLCP server for an HTTP handler that serves HTTP/1.1 or
// HTTP/2 (by what a connection starts with). At each handshake choose
// says what to answer the client's ALPN with: a protocol to choose, ""
// for no ALPN at all, or "refuse" to end with an alert a hello that
// carries extensions, as GmSSL 3.1 servers do. handshakes counts the
// hellos.
func alpnTarget(t *testing.T, p *testPKI, choose func(*tlcp.ClientHelloInfo) string, h http.Handler) (addr string, handshakes *atomic.Int64) {
	t.Helper()
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	handshakes = &atomic.Int64{}
	base := &tlcp.Config{Certificates: []tlcp.Certificate{*cert}}
	base.GetConfigForClient = func(hi *tlcp.ClientHelloInfo) (*tlcp.Config, error) {
		handshakes.Add(1)
		switch proto := choose(hi); proto {
		case "refuse":
			if len(hi.SupportedProtos) > 0 {
				return nil, &tlcp.AlertError{Alert: tlcp.AlertUnsupportedExtension, Err: fmt.Errorf("hello extensions refused")}
			}
			return nil, nil
		case "":
			return nil, nil
		default:
			c := base.Clone()
			c.GetConfigForClient = nil
			c.NextProtos = []string{proto}
			return c, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	protocols := &http.Protocols{}
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: protocols, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tlcp.NewListener(ln, base))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), handshakes
}

// protoRecorder answers with the HTTP version and the body it received.
func protoRecorder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Proto, r.URL.Path, body)
	})
}

// TestOutboundHTTP2Fallback: with http2, a target that chooses http/1.1,
// or answers no ALPN, is spoken to in HTTP/1.1 with keep-alive; the first
// request (a POST, its body intact) costs one handshake, whose connection
// the HTTP/1.1 side takes. (The independent tjfoc server, which answers no
// ALPN, is in TestOutboundToTjfocServer.)
func TestOutboundHTTP2Fallback(t *testing.T) {
	p := getPKI(t)
	for _, choice := range []string{"http/1.1", ""} {
		t.Run(fmt.Sprintf("alpn %q", choice), func(t *testing.T) {
			addr, handshakes := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return choice }, protoRecorder())
			gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+addr), "ca: "+p.dual.CACert+"\nserver_name: localhost", "http2: true")
			client := &http.Client{Timeout: 20 * time.Second}
			for i := range 5 {
				path := fmt.Sprintf("/r%d", i)
				resp, err := client.Post("http://"+gw.Addr("app").String()+path, "text/plain", strings.NewReader("payload"))
				if err != nil {
					t.Fatal(err)
				}
				if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != "HTTP/1.1 "+path+" payload" {
					t.Fatalf("%d %q", resp.StatusCode, body)
				}
			}
			if v := handshakes.Load(); v != 1 {
				t.Errorf("%v handshakes for 5 requests in a row, want 1", v)
			}
			want := choice
			if want == "" {
				want = "none"
			}
			if logLine(logs, "upstream target speaks HTTP/1.1: it did not choose h2", map[string]string{"alpn": want}) == nil {
				t.Errorf("no log line for the version chosen:\n%s", logs)
			}
		})
	}
}

// TestOutboundHTTP2ChoiceChanges: a target that stops choosing h2 (a
// redeploy) is spoken to in HTTP/1.1 from its next connection on, and in
// HTTP/2 again when it chooses h2 again; the request that finds out is
// sent on the other version with its body, over the connection that found
// out.
func TestOutboundHTTP2ChoiceChanges(t *testing.T) {
	p := getPKI(t)
	var choice atomic.Value
	choice.Store("h2")
	addr, handshakes := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return choice.Load().(string) }, protoRecorder())
	gw, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+addr), "ca: "+p.dual.CACert+"\nserver_name: localhost", "http2: true")
	client := &http.Client{Timeout: 20 * time.Second}
	send := func(want string) {
		t.Helper()
		resp, err := client.Post("http://"+gw.Addr("app").String()+"/x", "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != want+" /x body" {
			t.Fatalf("%d %q, want %s", resp.StatusCode, body, want)
		}
	}
	for _, step := range []struct{ alpn, proto string }{{"h2", "HTTP/2.0"}, {"", "HTTP/1.1"}, {"h2", "HTTP/2.0"}, {"http/1.1", "HTTP/1.1"}} {
		choice.Store(step.alpn)
		gw.current().pools["partner"].Transport.CloseIdle()
		before := handshakes.Load()
		send(step.proto)
		send(step.proto)
		if v := handshakes.Load() - before; v != 1 {
			t.Errorf("ALPN %q: %v handshakes for two requests, want 1", step.alpn, v)
		}
	}
}

// TestOutboundHTTP2Refused: a target that refuses the ALPN extension (as
// GmSSL 3.1 servers do) fails the handshake with its alert in the log, the
// metric and a cause that names ALPN; without http2 the same target
// serves.
func TestOutboundHTTP2Refused(t *testing.T) {
	p := getPKI(t)
	addr, _ := alpnTarget(t, p, func(*tlcp.ClientHelloInfo) string { return "refuse" }, protoRecorder())
	section := "ca: " + p.dual.CACert + "\nserver_name: localhost"
	client := &http.Client{Timeout: 20 * time.Second}

	gw, logs := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+addr), section, "http2: true\nretries: 0")
	resp, body := get(t, client, "http://"+gw.Addr("app").String()+"/x")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	labels := map[string]string{"upstream": "partner", "stage": "handshake", "reason": "alert_received_unsupported_extension"}
	if v := counterSum(t, gw, "gmgate_upstream_failures_total", labels); v != 1 {
		t.Errorf("failures %v: %v", labels, scrape(t, gw)["gmgate_upstream_failures_total"])
	}
	line := logLine(logs, "upstream failed", map[string]string{"stage": "handshake", "reason": labels["reason"]})
	if line == nil || !strings.Contains(fmt.Sprint(line["cause"]), "TLCP handshake failed") || !strings.Contains(fmt.Sprint(line["cause"]), "ALPN h2 was offered for http2: true") {
		t.Errorf("no log line naming ALPN:\n%s", logs)
	}

	plain, _ := clientGateway(t, "http", fmt.Sprintf("%q", "tlcp://"+addr), section, "")
	resp, body = get(t, client, "http://"+plain.Addr("app").String()+"/x")
	if resp.StatusCode != http.StatusOK || body != "HTTP/1.1 /x " {
		t.Fatalf("without http2: %d %q", resp.StatusCode, body)
	}
}

// TestGRPCOverTLCPUpstream: gRPC calls from a TLS client (unary, and
// bidirectional streams with trailers and a status that is not OK) pass
// through a tlcp:// upstream with http2 to a service gateway in front of
// a gRPC server, all over one TLCP connection.
func TestGRPCOverTLCPUpstream(t *testing.T) {
	p := getPKI(t)
	id, _ := clientIdentity(t, p)
	svc := tlcpService(t, p, grpcUpstream(t))
	gw := startServer(t, parseConfig(t, fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    tls: {cert: %s, key: %s}
    routes: [{upstream: partner}]
upstreams:
  partner:
    targets: ["tlcp://%s"]
    http2: true
    health: {disabled: true}
    tlcp:
%s
`, p.tlsCert, p.tlsKey, svc.Addr("edge"), indent(identitySection(p, id, "ECDHE_SM4_GCM_SM3"), "      "))), nil)
	cc, err := grpc.NewClient("passthrough:///"+gw.Addr("edge").String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	grpcCalls(t, cc)
	if v := counterSum(t, svc, "gmgate_handshakes_total", map[string]string{"protocol": "tlcp", "result": "ok"}); v != 1 {
		t.Errorf("the service gateway counted %v TLCP handshakes, want 1", v)
	}
	if v, _ := metricValue(scrape(t, svc), "gmgate_request_duration_seconds", map[string]string{"http_version": "1.1"}); v != 0 {
		t.Errorf("the service gateway saw %v HTTP/1.1 requests", v)
	}
}

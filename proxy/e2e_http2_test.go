package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// h2TLSClient speaks HTTP/2 over TLS to the gateway.
func h2TLSClient(t testing.TB, p *testPKI) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// h2TLCPClient speaks HTTP/2 over TLCP to the gateway: the tlcp client
// offers protos by ALPN, and net/http's HTTP/2 client (golang.org/x/net/
// http2, bundled) runs on the established connection as on any
// connection that is secure already. negotiated returns the protocols
// the connections made so far chose (the transport may still be dialing
// for requests that another connection served).
func h2TLCPClient(t testing.TB, p *testPKI, protos []string) (client *http.Client, negotiated func() []string) {
	t.Helper()
	var mu sync.Mutex
	var chosen []string
	tr := &http.Transport{Protocols: &http.Protocols{}, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &tlcp.Dialer{Config: &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: protos}}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		chosen = append(chosen, c.(*tlcp.Conn).ConnectionState().NegotiatedProtocol)
		mu.Unlock()
		return c, nil
	}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tlcpRoundTripper{tr}, Timeout: 20 * time.Second}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(chosen)
	}
}

// tlcpRoundTripper sends https:// requests over connections its transport
// made secure with TLCP, which net/http takes for plain ones.
type tlcpRoundTripper struct{ tr *http.Transport }

func (rt tlcpRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme = "http"
	return rt.tr.RoundTrip(r)
}

func TestHTTP2FromClients(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	var access testlog.Buffer
	s := startServer(t, testConfig(p, up.URL), slog.New(slog.NewJSONHandler(&access, nil)))
	tlcpH2, negotiated := h2TLCPClient(t, p, []string{"h2", "http/1.1"})
	for name, client := range map[string]*http.Client{"tls": h2TLSClient(t, p), "tlcp": tlcpH2} {
		t.Run(name, func(t *testing.T) {
			// Requests in flight at once share one connection.
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", gatewayURL(s, fmt.Sprintf("/h2/%d", i)), strings.NewReader("body "+fmt.Sprint(i)))
					req.Host = "api.example.cn"
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					defer resp.Body.Close()
					var e echoed
					if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
						errs <- err
						return
					}
					if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusCreated || e.Body != "body "+fmt.Sprint(i) || e.Host != "api.example.cn" ||
						e.Headers.Get("X-Tlcp-Protocol") == "" || e.Headers.Get("X-Forwarded-Proto") != "https" {
						errs <- fmt.Errorf("%s %d, upstream saw %+v", resp.Proto, resp.StatusCode, e)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
	if made := negotiated(); len(made) == 0 || len(made) > 8 || slices.ContainsFunc(made, func(p string) bool { return p != "h2" }) {
		t.Errorf("TLCP connections made: %q, want each to choose h2", made)
	}
	mf := scrape(t, s)
	if v, _ := metricValue(mf, "gmgate_request_duration_seconds", map[string]string{"site": "default", "http_version": "2"}); v != 16 {
		t.Errorf("HTTP/2 requests in the metrics: %v, want 16", v)
	}
	testwait.For(t, "access lines", func() bool { return strings.Count(access.String(), `"http":"HTTP/2.0"`) == 16 })
	if !strings.Contains(access.String(), `"protocol":"tlcp"`) {
		t.Errorf("access log:\n%s", access.String())
	}
}

func TestHTTP2Off(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	off := false
	cfg.Listeners[0].HTTP2 = &off
	s := startServer(t, cfg, nil)
	resp, _ := get(t, h2TLSClient(t, p), gatewayURL(s, "/"))
	if resp.ProtoMajor != 1 {
		t.Errorf("TLS with http2: false: %s", resp.Proto)
	}
	// A TLCP client that offers only h2 is refused by ALPN; one that
	// offers nothing and starts HTTP/2 anyway is closed.
	client, _ := h2TLCPClient(t, p, []string{"h2"})
	if _, err := client.Get(gatewayURL(s, "/")); err == nil || !strings.Contains(err.Error(), "no application protocol") {
		t.Errorf("TLCP offering only h2: %v", err)
	}
	client, _ = h2TLCPClient(t, p, nil)
	if resp, err := client.Get(gatewayURL(s, "/")); err == nil {
		resp.Body.Close()
		t.Errorf("TLCP starting HTTP/2 on a listener without it: %s", resp.Status)
	}
	// HTTP/1.1 goes on as before.
	if resp, _ := get(t, tlcpClient(t, p, nil), gatewayURL(s, "/")); resp.StatusCode != http.StatusCreated {
		t.Errorf("HTTP/1.1 over TLCP: %s", resp.Status)
	}
}

// A client that chose http/1.1 by ALPN may not start HTTP/2.
func TestHTTP2NeedsALPNChoice(t *testing.T) {
	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "a").URL), nil)
	client, _ := h2TLCPClient(t, p, []string{"http/1.1"})
	if resp, err := client.Get(gatewayURL(s, "/")); err == nil {
		resp.Body.Close()
		t.Errorf("HTTP/2 on a connection that chose http/1.1: %s", resp.Status)
	}
}

// An https:// upstream with http2 is reached over HTTP/2.
func TestHTTP2ToHTTPSUpstream(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream-Proto", r.Proto)
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "hello")
		w.Header().Set("X-Checksum", "5")
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	cfg := testConfig(p, up.URL)
	cfg.Upstreams["app"].HTTP2 = true
	cfg.Upstreams["app"].TLS = &config.UpstreamTLS{InsecureSkipVerify: true}
	s := startServer(t, cfg, nil)
	resp, body := get(t, tlcpClient(t, p, nil), gatewayURL(s, "/"))
	if resp.Header.Get("X-Upstream-Proto") != "HTTP/2.0" || body != "hello" || resp.Trailer.Get("X-Checksum") != "5" {
		t.Errorf("upstream spoke %q; body %q, trailer %q", resp.Header.Get("X-Upstream-Proto"), body, resp.Trailer.Get("X-Checksum"))
	}
	// Without http2 the same upstream is reached over HTTP/1.1.
	cfg = testConfig(p, up.URL)
	cfg.Upstreams["app"].TLS = &config.UpstreamTLS{InsecureSkipVerify: true}
	s = startServer(t, cfg, nil)
	if resp, _ := get(t, tlcpClient(t, p, nil), gatewayURL(s, "/")); resp.Header.Get("X-Upstream-Proto") != "HTTP/1.1" {
		t.Errorf("without http2 the upstream spoke %q", resp.Header.Get("X-Upstream-Proto"))
	}
}

// echoStream is a bidirectional-streaming gRPC method: it answers each
// message with its upper-case form, and ends with the status the client
// asks for in its metadata, with a trailer that counts the messages.
var echoStream = grpc.StreamDesc{StreamName: "Echo", ServerStreams: true, ClientStreams: true}

const echoMethod = "/gmgate.test.Echo/Echo"

func echoStreamHandler(_ any, stream grpc.ServerStream) error {
	n := 0
	for {
		in := &wrapperspb.StringValue{}
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n++
		if err := stream.SendMsg(wrapperspb.String(strings.ToUpper(in.Value))); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("x-messages", fmt.Sprint(n)))
	if md, _ := metadata.FromIncomingContext(stream.Context()); len(md.Get("x-fail")) > 0 {
		return status.Error(codes.ResourceExhausted, "asked to fail")
	}
	return nil
}

// grpcUpstream is a gRPC server on a plain socket (h2c) with the health
// service (SERVING) and the echo stream.
func grpcUpstream(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "gmgate.test.Echo",
		HandlerType: (*any)(nil),
		Streams:     []grpc.StreamDesc{{StreamName: "Echo", Handler: echoStreamHandler, ServerStreams: true, ClientStreams: true}},
	}, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "h2c://" + ln.Addr().String()
}

// grpcCalls makes a unary and a bidirectional-streaming call through cc.
func grpcCalls(t *testing.T, cc *grpc.ClientConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("unary health check: %v, %v", resp, err)
	}
	// A status that is not OK comes back as it was sent.
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nothing"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want NotFound", err)
	}

	for _, fail := range []bool{false, true} {
		callCtx := ctx
		if fail {
			callCtx = metadata.AppendToOutgoingContext(ctx, "x-fail", "1")
		}
		stream, err := cc.NewStream(callCtx, &echoStream, echoMethod)
		if err != nil {
			t.Fatal(err)
		}
		// Each answer arrives before the next message is sent: both
		// directions stream at once.
		for _, word := range []string{"sm2", "sm3", "sm4"} {
			if err := stream.SendMsg(wrapperspb.String(word)); err != nil {
				t.Fatal(err)
			}
			out := &wrapperspb.StringValue{}
			if err := stream.RecvMsg(out); err != nil {
				t.Fatal(err)
			}
			if out.Value != strings.ToUpper(word) {
				t.Fatalf("echo of %q: %q", word, out.Value)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		err = stream.RecvMsg(&wrapperspb.StringValue{})
		want := codes.OK
		if fail {
			want = codes.ResourceExhausted
		}
		if fail && status.Code(err) != want || !fail && !errors.Is(err, io.EOF) {
			t.Errorf("end of stream: %v, want %s", err, want)
		}
		if got := stream.Trailer().Get("x-messages"); len(got) != 1 || got[0] != "3" {
			t.Errorf("trailer x-messages: %q", got)
		}
	}
}

func TestGRPCThroughH2CUpstream(t *testing.T) {
	p := getPKI(t)
	s := startServer(t, testConfig(p, grpcUpstream(t)), nil)
	addr := s.Addr("edge").String()

	t.Run("tls", func(t *testing.T) {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		grpcCalls(t, cc)
	})
	t.Run("tlcp", func(t *testing.T) {
		dial := func(ctx context.Context, addr string) (net.Conn, error) {
			d := &tlcp.Dialer{Config: &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"h2"}}}
			return d.DialContext(ctx, "tcp", addr)
		}
		// The TLCP connection is the transport's security; gRPC itself
		// adds none on top of it.
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithContextDialer(dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		grpcCalls(t, cc)
	})
}

// curl --http2 against the TLS side, when curl is installed.
func TestHTTP2Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed; .ci/run installs it")
	}
	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "a").URL), nil)
	_, port, _ := net.SplitHostPort(s.Addr("edge").String())
	out, err := exec.Command(curl, "--http2", "-sS", "--cacert", p.tlsRoot, "--resolve", "localhost:"+port+":127.0.0.1",
		"-o", "/dev/null", "-w", "%{http_version} %{http_code}", "https://localhost:"+port+"/curl").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if string(out) != "2 201" {
		t.Errorf("curl --http2: %q, want HTTP/2 and 201", out)
	}
}

// An HTTP/2 connection idle past the time HTTP/1.1 connections are parked
// after (idle.go) stays in the HTTP server and serves its next request.
func TestHTTP2IdleConnectionServes(t *testing.T) {
	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "a").URL), nil)
	var conns int
	var mu sync.Mutex
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"}, ForceAttemptHTTP2: true}
	dialer := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		conns++
		mu.Unlock()
		return dialer.DialContext(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	for i := range 2 {
		resp, body := get(t, client, gatewayURL(s, "/"))
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusCreated {
			t.Fatalf("request %d: %s %d %s", i, resp.Proto, resp.StatusCode, body)
		}
		time.Sleep(2 * edge.IdleParkAfter)
	}
	if conns != 1 {
		t.Errorf("%d connections, want the one kept", conns)
	}
}

// h2cClient speaks HTTP/2 with prior knowledge over plain TCP (h2c).
func h2cClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: &http.Protocols{}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// refusedAsHTTP1 reports whether the server answered a preface it
// refused: a 400 in HTTP/1.1, then the connection closed.
func refusedAsHTTP1(answer []byte) bool {
	return strings.HasPrefix(string(answer), "HTTP/1.1 400 ")
}

// sendFragmentedPreface sends the HTTP/2 preface on conn in two writes,
// its first two bytes apart from the rest, with an empty SETTINGS frame,
// and returns what the server answers until it closes the connection
// (or until it has sent a frame's header).
func sendFragmentedPreface(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, edge.HTTP2Preface[:2]); err != nil {
		t.Fatal(err)
	}
	// Give the server the chance to read the two bytes on their own: the
	// client's pace, not a wait for an event.
	time.Sleep(50 * time.Millisecond)
	if _, err := io.WriteString(conn, edge.HTTP2Preface[2:]+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || isHTTP2Frame(got) {
			return got
		}
	}
}

// isHTTP2Frame reports whether b starts with the header of a SETTINGS
// frame, the first thing an HTTP/2 server sends.
func isHTTP2Frame(b []byte) bool {
	return len(b) >= 9 && b[3] == 0x4 && !strings.HasPrefix(string(b), "HTTP/")
}

// HTTP/2 is decided for each connection: a connection that may not speak
// it is refused when it starts with the preface, however its bytes are
// split into reads.
func TestHTTP2PrefaceRefusedWhenNotChosen(t *testing.T) {
	p := getPKI(t)
	cfg := testConfig(p, echoUpstream(t, "a").URL)
	cfg.Listeners = append(cfg.Listeners, config.Listener{Name: "local", Listen: "127.0.0.1:0", Protocol: config.ProtocolHTTP,
		Routes: []config.Route{{Upstream: "app", Path: "/"}}})
	s := startServer(t, cfg, nil)

	if resp, err := h2cClient(t).Get("http://" + s.Addr("local").String() + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("h2c prior knowledge on an http listener: %s", resp.Proto)
	}
	plain, err := net.Dial("tcp", s.Addr("local").String())
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, plain); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface on an http listener was answered %q, want a 400 in HTTP/1.1", got)
	}
	// A TLCP client that chose http/1.1 by ALPN.
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, conn); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface on a TLCP connection that chose http/1.1 was answered %q, want a 400 in HTTP/1.1", got)
	}
	// One that chose nothing may, however it sends the preface.
	conn, err = tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, conn); !isHTTP2Frame(got) {
		t.Errorf("a fragmented preface on a TLCP connection that may speak HTTP/2: %q, want a SETTINGS frame", got)
	}
}

// A reload that changes a kept listener's protocol changes whether its
// connections may speak HTTP/2.
func TestReloadChangesListenerProtocolHTTP2(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	tlcpCfg := testConfig(p, up.URL)
	tlcpCfg.Listeners[0].Protocol = config.ProtocolTLCP
	tlcpCfg.Listeners[0].TLS = nil
	httpCfg := testConfig(p, up.URL)
	httpCfg.Listeners[0].Protocol = config.ProtocolHTTP
	httpCfg.Listeners[0].TLCP = nil
	httpCfg.Listeners[0].TLS = nil
	httpCfg.Listeners[0].HTTP2 = nil

	s := startServer(t, httpCfg, nil)
	addr := s.Addr("edge").String()
	if err := s.Reload(tlcpCfg); err != nil {
		t.Fatal(err)
	}
	if s.Addr("edge").String() != addr {
		t.Fatalf("the reload moved the listener from %s to %s", addr, s.Addr("edge"))
	}
	client, negotiated := h2TLCPClient(t, p, []string{"h2", "http/1.1"})
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("HTTP/2 over TLCP after a reload from http to tlcp: %v (connections chose %q)", err, negotiated())
	}
	readAll(t, resp)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusCreated {
		t.Errorf("after a reload from http to tlcp: %s %s", resp.Proto, resp.Status)
	}

	if err := s.Reload(httpCfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	if resp, err := h2cClient(t).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("h2c prior knowledge after a reload from tlcp to http: %s", resp.Proto)
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("h2c prior knowledge after a reload from tlcp to http: %v, want the connection refused at once", err)
	}
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := sendFragmentedPreface(t, plain); !refusedAsHTTP1(got) {
		t.Errorf("a fragmented preface after a reload from tlcp to http was answered %q, want a 400 in HTTP/1.1", got)
	}
	if resp, _ := get(t, http.DefaultClient, "http://"+addr+"/"); resp.StatusCode != http.StatusCreated {
		t.Errorf("HTTP/1.1 after a reload from tlcp to http: %s", resp.Status)
	}
}

// A connection that spoke HTTP/1.1 and was parked while idle goes back to
// the HTTP server as a new connection; it may not start HTTP/2 then,
// though its handshake would have let it start with it.
func TestParkedHTTP1ConnectionStaysHTTP1(t *testing.T) {
	p := getPKI(t)
	s := startServer(t, testConfig(p, echoUpstream(t, "app").URL), nil)
	c := dialRaw(t, p, s, "tlcp")
	c.get(getRequest, 1)
	testwait.For(t, "the idle connection to be parked", func() bool { return parkedCount(s) == 1 })
	if got := sendFragmentedPreface(t, c.conn); !refusedAsHTTP1(got) {
		t.Errorf("the preface on a parked HTTP/1.1 connection was answered %q, want a 400 in HTTP/1.1", got)
	}
}

// TestH2CUpgradeNotForwarded: a client's request to upgrade to
// cleartext HTTP/2 (Upgrade: h2c) is not passed to the upstream. An
// upstream that takes it (hypercorn does, with or without
// "Connection: HTTP2-Settings") would turn the connection into a tunnel
// that gmgate no longer reads: the client could then send any request
// to that upstream, past the routes' paths, with forwarding and session
// headers of its own making. The request is served as a plain HTTP/1.1
// one; WebSocket upgrades still pass (TestWebSocketUpgrade).
func TestH2CUpgradeNotForwarded(t *testing.T) {
	p := getPKI(t)
	seen := make(chan http.Header, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		if r.Header.Get("Upgrade") != "h2c" {
			fmt.Fprint(w, "plain HTTP/1.1")
			return
		}
		// A lenient h2c server: it switches on Upgrade alone.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
		brw.Flush()
		_, _ = io.Copy(io.Discard, brw)
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Listeners[0].Routes = []config.Route{{Path: "/public/", Upstream: "app"}}
	s := startServer(t, cfg, nil)

	for _, req := range []string{
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n",
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade\r\n",
		"Upgrade: H2C\r\nConnection: upgrade\r\n",
	} {
		conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(conn, "GET /public/ HTTP/1.1\r\nHost: localhost\r\n"+req+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		h := <-seen
		if resp.StatusCode != http.StatusOK || string(body) != "plain HTTP/1.1" {
			t.Errorf("request with %q: %d %q, want 200 from a plain request", req, resp.StatusCode, body)
		}
		if h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" {
			t.Errorf("request with %q: the upstream got Upgrade %q, HTTP2-Settings %q", req, h.Get("Upgrade"), h.Get("Http2-Settings"))
		}
	}
}

func TestDropH2CUpgrade(t *testing.T) {
	for _, tc := range []struct {
		upgrade []string
		want    string // "" for no Upgrade header
	}{
		{[]string{"h2c"}, ""},
		{[]string{"websocket"}, "websocket"},
		{[]string{"h2c, websocket"}, "websocket"},
		{[]string{"H2C", "websocket"}, "websocket"},
	} {
		h := http.Header{"Upgrade": tc.upgrade, "Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"}}
		forward.DropH2CUpgrade(h)
		if got := h.Get("Upgrade"); got != tc.want {
			t.Errorf("Upgrade %q: %q left, want %q", tc.upgrade, got, tc.want)
		}
		if tc.want == "websocket" && len(tc.upgrade) == 1 && tc.upgrade[0] == "websocket" {
			if h.Get("Http2-Settings") == "" {
				t.Errorf("Upgrade %q: HTTP2-Settings removed from a request that offered no h2c", tc.upgrade)
			}
		} else if h.Get("Http2-Settings") != "" {
			t.Errorf("Upgrade %q: HTTP2-Settings kept", tc.upgrade)
		}
	}
}

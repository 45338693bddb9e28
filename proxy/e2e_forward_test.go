package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/upstream"
)

// forwardCases are requests without a body and what the upstream answers
// them with (%s: nothing), by path. Responses of unknown length name their
// type: net/http guesses a missing one from the first write, which races
// with the flush of the header, the same race with either path.
var forwardCases = []struct {
	name, request, response string
}{
	{"plain", "GET /plain HTTP/1.1\r\nHost: api.example.cn\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello"},
	{"no user agent, query", "GET /q?b=2&a=1&c=%41 HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{"query with a semicolon and a bad escape", "GET /q?a=1;b=2&c=%zz&d=4 HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{"empty query", "GET /q? HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"hop-by-hop and spoofed headers", "DELETE /item/7 HTTP/1.1\r\nHost: h:8443\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\n" +
		"Keep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\nTe: gzip, trailers\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\n" +
		"X-Forwarded-For: 6.6.6.6\r\nX_Forwarded_For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Real-Ip: 6.6.6.6\r\nX-Tlcp-Protocol: forged\r\n" +
		"X-Forwarded-Host: evil\r\nX-Forwarded-Proto: http\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
		"HTTP/1.1 202 Accepted\r\nConnection: X-Back\r\nX-Back: hop\r\nKeep-Alive: timeout=3\r\nContent-Length: 0\r\n\r\n"},
	{"POST without a body", "POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nIdempotency-Key: k1\r\n\r\n",
		"HTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n"},
	{"HEAD", "HEAD /big HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 12345\r\nEtag: \"x\"\r\n\r\n"},
	{"204", "GET /204 HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 204 No Content\r\nX-B: 1\r\n\r\n"},
	{"304", "GET /304 HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"x\"\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n"},
	{"chunked with announced trailers", "GET /chunked HTTP/1.1\r\nHost: h\r\nTe: trailers\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n"},
	{"chunked with trailers not announced", "GET /chunked2 HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n0\r\nX-Late: 1\r\n\r\n"},
	{"length and trailer", "GET /both HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nContent-Type: application/grpc\r\n\r\n2\r\nab\r\n0\r\nX-Sum: 2\r\n\r\n"},
	{"server-sent events", "GET /events HTTP/1.1\r\nHost: h\r\nAccept: text/event-stream\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream; charset=utf-8\r\nContent-Length: 12\r\n\r\ndata: hi\n\n\n\n"},
	{"no length, closed", "GET /close HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"},
	{"early hints", "GET /hints HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{"101 without an upgrade", "GET /switch HTTP/1.1\r\nHost: h\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
	{"bare 101", "GET /switch2 HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\n\r\n"},
	{"error status", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 4\r\n\r\nbusy"},
	{"upstream hangs up", "GET /hangup HTTP/1.1\r\nHost: h\r\n\r\n", ""},
	{"garbage", "GET /garbage HTTP/1.1\r\nHost: h\r\n\r\n", "SSH-2.0-OpenSSH\r\n\r\n"},
}

// forwardUpstream answers each request with the response of its case, and
// keeps the last request it read, as it came.
type forwardUpstream struct {
	ln   net.Listener
	mu   sync.Mutex
	last []byte
}

func (u *forwardUpstream) serve(responses map[string]string) {
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for {
				var head bytes.Buffer
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					head.WriteString(line)
					if line == "\r\n" {
						break
					}
				}
				u.mu.Lock()
				u.last = head.Bytes()
				u.mu.Unlock()
				path := strings.Fields(head.String())[1]
				resp := responses[strings.SplitN(path, "?", 2)[0]]
				if resp == "" {
					return
				}
				io.WriteString(c, resp)
				if strings.HasSuffix(path, "close") || strings.Contains(resp, " 101 ") {
					return
				}
			}
		}()
	}
}

func (u *forwardUpstream) lastRequest() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := string(u.last)
	u.last = nil
	return s
}

// A request without a body and its response pass through forward as they
// pass through httputil.ReverseProxy, over the pool's own connections or
// over net/http's Transport: the upstream receives the same bytes, the
// client the same response.
func TestForwardMatchesReverseProxy(t *testing.T) {
	p := getPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	up := &forwardUpstream{ln: ln}
	responses := map[string]string{}
	for _, c := range forwardCases {
		path := strings.Fields(c.request)[1]
		responses[strings.SplitN(path, "?", 2)[0]] = c.response
	}
	go up.serve(responses)

	cfg := testConfig(p, "http://"+ln.Addr().String())
	cfg.Upstreams["app"].Health.Disabled = true
	retries := 0
	cfg.Upstreams["app"].Retries = &retries
	s := startServer(t, cfg, nil)
	pool := s.current().pools["app"]
	site := s.siteFor("edge", "h")
	info := &forward.ConnInfo{Listener: "edge", Protocol: "tlcp", Suite: "ECC_SM4_GCM_SM3", Site: site.Name}
	// ReverseProxy over net/http's own Transport, as every request went
	// before the pool had a client of its own for these.
	netHTTP := pool.Transport.(*upstream.HttpTransport).Http
	viaNetHTTP := forward.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.URL.Host = ln.Addr().String()
		return netHTTP.RoundTrip(r)
	})
	const (
		lean = iota
		reverseProxy
		reverseProxyNetHTTP
	)
	gateway := func(how int) string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &forward.Recorder{ResponseWriter: w}
			if !forward.Forwardable(r) {
				t.Errorf("%s %s not forwardable", r.Method, r.URL)
			}
			if how == lean {
				s.fwd.Forward(rec, r, pool, site.Forwarding)
				return
			}
			rp := s.fwd.ReverseProxy(pool, site.Forwarding)
			if how == reverseProxyNetHTTP {
				rp.Transport = viaNetHTTP
			}
			rp.ModifyResponse = rec.NoteTarget
			rp.ServeHTTP(rec, r)
		}))
		srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, forward.ConnInfoKey{}, info)
		}
		srv.Config.ErrorLog = s.stdErrorLog
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	viaForward, viaProxy, viaTransport := gateway(lean), gateway(reverseProxy), gateway(reverseProxyNetHTTP)
	date := regexp.MustCompile(`(?m)^Date: .*\r\n`)
	exchange := func(addr, request string) (upstream, response string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, request)
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		req := &http.Request{Method: strings.Fields(request)[0]}
		resp, err := http.ReadResponse(br, req)
		for err == nil && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			resp, err = http.ReadResponse(br, req)
		}
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return up.lastRequest(), date.ReplaceAllString(raw.String(), "")
	}
	for _, c := range forwardCases {
		t.Run(c.name, func(t *testing.T) {
			gotUp, gotResp := exchange(viaForward, c.request)
			wantUp, wantResp := exchange(viaProxy, c.request)
			if gotUp != wantUp {
				t.Errorf("the upstream received\n%q\nwith ReverseProxy\n%q", gotUp, wantUp)
			}
			if gotResp != wantResp {
				t.Errorf("the client received\n%q\nwith ReverseProxy\n%q", gotResp, wantResp)
			}
			wantUp, wantResp = exchange(viaTransport, c.request)
			if gotUp != wantUp {
				t.Errorf("the upstream received\n%q\nwith net/http's Transport\n%q", gotUp, wantUp)
			}
			if gotResp != wantResp {
				t.Errorf("the client received\n%q\nwith net/http's Transport\n%q", gotResp, wantResp)
			}
			if testing.Verbose() {
				t.Logf("upstream:\n%s\nclient:\n%s", gotUp, gotResp)
			}
		})
	}
}

// TestForwardClientGoneEndsExchange: a client that goes away while the
// upstream holds its GET (forwarded on the handler's goroutine) ends the
// exchange with the upstream at once, as a canceled request does, and
// the next client is served on a connection of its own.
func TestForwardClientGoneEndsExchange(t *testing.T) {
	p := getPKI(t)
	held := make(chan struct{}, 1)
	ended := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hold" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		held <- struct{}{}
		select {
		case <-r.Context().Done():
			// The gateway closed the connection under the request.
			ended <- struct{}{}
		case <-release:
		}
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)

	c := dialTLCP(t, p, s)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// A first request, so that the second is one of a kept-alive
	// connection, as under load.
	br := bufio.NewReader(c)
	for _, path := range []string{"/", "/hold"} {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if path == "/" {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	<-held
	c.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream exchange of a client gone away did not end")
	}

	c2 := dialTLCP(t, p, s)
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c2, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("next client: %d %q", resp.StatusCode, b)
	}
}

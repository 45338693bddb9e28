package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
)

// streamingUpstream answers at once, while the request body may still be
// on its way, with ?ticks= lines 50 ms apart, then "done", or with ?hang
// nothing more until the request ends.
func streamingUpstream(t *testing.T, h2c bool) *httptest.Server {
	// An HTTP/1 server does not watch a full-duplex request's connection
	// for its end; the test's end stops a hanging handler.
	testEnd := make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctl := http.NewResponseController(w)
		_ = ctl.EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		_ = ctl.Flush()
		ticks, _ := strconv.Atoi(r.URL.Query().Get("ticks"))
		for range ticks {
			_, _ = io.WriteString(w, "tick\n")
			_ = ctl.Flush()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Query().Has("hang") {
			select {
			case <-r.Context().Done():
			case <-testEnd:
			}
			return
		}
		_, _ = io.WriteString(w, "done\n")
	}))
	if h2c {
		up.Config.Protocols = &http.Protocols{}
		up.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	up.Start()
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(testEnd) })
	return up
}

// While the response streams to the client, timeouts.request_body counts
// the time with nothing moving either way: a client that says nothing
// more after its first bytes (a bidirectional gRPC call whose client
// only listens) is not cut while the response keeps coming; a stream
// quiet both ways is.
func TestRequestBodyIdleCountsResponse(t *testing.T) {
	const idle = 300 * time.Millisecond
	p := getPKI(t)
	for _, tc := range []struct {
		name   string
		client func() *http.Client
		h2c    bool
	}{
		{"http2", func() *http.Client { c, _ := h2TLCPClient(t, p, []string{"h2"}); return c }, true},
		{"http1.1 chunked", func() *http.Client { return tlcpClient(t, p, nil) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := streamingUpstream(t, tc.h2c)
			target := up.URL
			if tc.h2c {
				target = "h2c://" + strings.TrimPrefix(up.URL, "http://")
			}
			cfg := testConfig(p, target)
			cfg.Timeouts.RequestBody = config.Duration(idle)
			s := startServer(t, cfg, nil)
			client := tc.client()

			// call sends a request body's first bytes and then nothing,
			// and returns what the response brought and how it ended.
			call := func(query string) (string, error) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				pr, pw := io.Pipe()
				defer pw.Close()
				go func() { _, _ = io.WriteString(pw, "hello\n") }()
				req, _ := http.NewRequestWithContext(ctx, "POST", gatewayURL(s, "/stream?"+query), pr)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", query, resp.Status)
				}
				var got strings.Builder
				_, err = io.Copy(&got, bufio.NewReader(resp.Body))
				if ctx.Err() != nil {
					t.Fatalf("%s: the response was still open after 20 s", query)
				}
				return got.String(), err
			}

			// 30 lines, 1.5 s in all: five times request_body.
			if got, err := call("ticks=30"); err != nil || got != strings.Repeat("tick\n", 30)+"done\n" {
				t.Errorf("a quiet client of a moving response: %q, %v; want the whole response", got, err)
			}
			got, err := call("ticks=1&hang")
			if err == nil || errors.Is(err, context.DeadlineExceeded) || got != "tick\n" {
				t.Errorf("a stream quiet both ways: %q, %v; want it cut", got, err)
			}
		})
	}
}

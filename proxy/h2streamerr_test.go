package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
)

// TestHTTP2BodyFailureEndsOnlyItsStream: over HTTP/2 a request whose body
// stops arriving is answered 408 and ends alone; the connection, which
// carries other requests (many users' behind a CDN), stays open and takes
// the next request. Over HTTP/1.1 the connection closes (the unread body
// is in its way; TestRequestBodyTimeout).
func TestHTTP2BodyFailureEndsOnlyItsStream(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "a")
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	s := startServer(t, cfg, nil)
	client, negotiated := h2TLCPClient(t, p, []string{"h2"})

	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("the first bytes"))
	resp, err := client.Post(gatewayURL(s, "/upload"), "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.ProtoMajor != 2 {
		t.Fatalf("stalled body: %s %d %q; want 408 over HTTP/2", resp.Proto, resp.StatusCode, body)
	}

	resp, err = client.Get(gatewayURL(s, "/after"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("next request: %d, want the upstream's 201", resp.StatusCode)
	}
	if got := negotiated(); len(got) != 1 {
		t.Errorf("connections made: %d (%s), want the first one kept after the 408", len(got), strings.Join(got, ","))
	}
}

package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRequestTrailersFiltered: of the trailer a client sends after its
// request body, the upstream gets the fields the client declared in its
// Trailer header and that may be trailers. net/http's HTTP/1.1 server
// keeps every field of the trailer, declared or not, and checks none of
// their names, so that shared with the outbound request they took a
// client's undeclared X-Forwarded-For, or a Host or Content-Length, to
// the upstream; a declared Host made an HTTP/2 upstream reset the
// stream, and the client got 502.
func TestRequestTrailersFiltered(t *testing.T) {
	p := getPKI(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var fields []string
		for k, vv := range r.Trailer {
			for _, v := range vv {
				fields = append(fields, k+"="+v)
			}
		}
		slices.Sort(fields)
		fmt.Fprintf(w, "%s %s", body, strings.Join(fields, ","))
	})
	h1 := httptest.NewServer(h)
	defer h1.Close()
	h2cAddr := h2cUpstream(t, h)
	for _, target := range []string{h1.URL, "h2c://" + h2cAddr} {
		s := startServer(t, testConfig(p, target), nil)
		c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(c, "PUT /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"+
			"Trailer: X-Checksum, Host, X-Real-IP\r\n\r\n"+
			"7\r\npayload\r\n0\r\n"+
			"X-Checksum: c0ffee\r\nHost: evil.example\r\nX-Real-IP: 6.6.6.6\r\n"+
			"X-Forwarded-For: 6.6.6.6\r\nX-Undeclared: 1\r\nContent-Length: 5\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("to %s: %v", target, err)
		}
		body := readAll(t, resp)
		c.Close()
		if resp.StatusCode != http.StatusOK || body != "payload X-Checksum=c0ffee" {
			t.Errorf("to %s: %d, the upstream read %q, want the body and the declared trailer X-Checksum only", target, resp.StatusCode, body)
		}
	}
}

package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// TestPOSTKeepsConnection: an HTTP/1.1 POST whose upstream answers once it
// has read the whole body leaves the client's connection open for the
// next request, whatever the body's framing: only a response that starts
// while the body is still coming is sent full duplex and closes the
// connection.
func TestPOSTKeepsConnection(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "got %q", body)
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for _, req := range []string{
		"POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
		"POST /b HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
	} {
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || body != `got "hello"` {
			t.Fatalf("%q: %d %q", req, resp.StatusCode, body)
		}
		if resp.Close {
			t.Fatalf("%q: the response closes the connection", req)
		}
	}
}

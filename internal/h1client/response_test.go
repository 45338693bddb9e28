package h1client

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// quickSeeds are responses for FuzzQuickResponse and TestQuickResponse:
// those quickResponse takes and those it leaves to ReadResponse.
var quickSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nx-lower-CASE: \t v \t\r\nX-Empty:\r\n\r\nabcHTTP/1.1 200 OK\r\n",
	"HTTP/1.1 404 Not Found  \r\nContent-Length: 2\r\nDate: Mon, 07 Dec 2026 18:00:00 GMT\r\n\r\nno",
	"HTTP/1.1 200\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 599 x\r\nContent-Length: 007\r\nX-High: \x80\xff\r\n\r\n1234567",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok",
	"HTTP/1.1 200 OK\r\n Folded: x\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-A: 1\r\n  continued\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nBad Name: 1\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n: empty name\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 101 Switching Protocols\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 20x OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
	"\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n\r\n",
	"",
}

// FuzzQuickResponse holds quickResponse to http.ReadResponse: a response
// it takes is the one ReadResponse makes of the same bytes (status,
// header, length, framing, body and what follows it), and one it does
// not take is left whole in the buffer.
func FuzzQuickResponse(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add(s, false)
	}
	f.Add(quickSeeds[0], true)
	f.Fuzz(func(t *testing.T, wire string, head bool) {
		checkQuickResponse(t, wire, head)
	})
}

func TestQuickResponse(t *testing.T) {
	taken := 0
	for _, s := range quickSeeds {
		if checkQuickResponse(t, s, false) {
			taken++
		}
	}
	if taken < 6 {
		t.Errorf("%d of the seeds taken", taken)
	}
	if checkQuickResponse(t, quickSeeds[0], true) {
		t.Errorf("a response to HEAD taken")
	}
	// A header not in the buffer whole is left to ReadResponse.
	long := "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 5000) + "\r\nContent-Length: 2\r\n\r\nok"
	if checkQuickResponse(t, long, false) {
		t.Errorf("a header longer than the buffer taken")
	}
}

// checkQuickResponse compares quickResponse with ReadResponse on wire and
// reports whether quickResponse took it.
func checkQuickResponse(t *testing.T, wire string, head bool) bool {
	t.Helper()
	req := &http.Request{Method: http.MethodGet}
	if head {
		req.Method = http.MethodHead
	}
	br := bufio.NewReaderSize(strings.NewReader(wire), readBuffer)
	// As the exchange does before reading the response: the first read
	// fills the buffer.
	_, _ = br.Peek(1)
	got := quickResponse(br, req)
	if got == nil {
		if rest, _ := io.ReadAll(br); string(rest) != wire {
			t.Fatalf("%q: not taken, but %d bytes consumed", wire, len(wire)-len(rest))
		}
		return false
	}
	wr := bufio.NewReader(strings.NewReader(wire))
	want, err := http.ReadResponse(wr, req)
	if err != nil {
		t.Fatalf("%q: taken, but ReadResponse fails: %v", wire, err)
	}
	g := fmt.Sprintf("%q %d %q %d.%d %d close=%v te=%q trailer=%v nobody=%v", got.Status, got.StatusCode, got.Proto, got.ProtoMajor,
		got.ProtoMinor, got.ContentLength, got.Close, got.TransferEncoding, got.Trailer, got.Body == http.NoBody)
	w := fmt.Sprintf("%q %d %q %d.%d %d close=%v te=%q trailer=%v nobody=%v", want.Status, want.StatusCode, want.Proto, want.ProtoMajor,
		want.ProtoMinor, want.ContentLength, want.Close, want.TransferEncoding, want.Trailer, want.Body == http.NoBody)
	if g != w {
		t.Fatalf("%q:\n got %s\nwant %s", wire, g, w)
	}
	if !reflect.DeepEqual(got.Header, want.Header) || got.Request != req {
		t.Fatalf("%q: header\n got %q\nwant %q", wire, got.Header, want.Header)
	}
	gb, gerr := io.ReadAll(got.Body)
	wb, werr := io.ReadAll(want.Body)
	if string(gb) != string(wb) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q: body\n got %q, %v\nwant %q, %v", wire, gb, gerr, wb, werr)
	}
	grest, _ := io.ReadAll(br)
	wrest, _ := io.ReadAll(wr)
	if string(grest) != string(wrest) {
		t.Fatalf("%q: after the body\n got %q\nwant %q", wire, grest, wrest)
	}
	return true
}

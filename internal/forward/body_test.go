package forward

import (
	"testing"
)

func TestFramingSniffer(t *testing.T) {
	for _, c := range []struct {
		stream string
		want   bool
	}{
		{"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"POST / HTTP/1.1\r\nCONTENT-LENGTH: 5\r\nTRANSFER-ENCODING: chunked\r\n\r\n", true},
		{"POST / HTTP/1.1\nContent-Length:5\nTransfer-Encoding:chunked\n\n", true},
		{"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nX-Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n", false}, // not ended yet
	} {
		// Every way of splitting the stream into two reads.
		for cut := range len(c.stream) + 1 {
			var s FramingSniffer
			got := s.Scan([]byte(c.stream[:cut]))
			got = s.Scan([]byte(c.stream[cut:])) || got
			if got != c.want {
				t.Fatalf("%q cut at %d: %v, want %v", c.stream, cut, got, c.want)
			}
		}
	}
}

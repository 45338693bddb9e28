package h1server

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

var requestSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /p/a%20b?q=1&r=%zz HTTP/1.1\r\nHost: example.test:443\r\nUser-Agent: t\r\nAccept: */*\r\nX-Multi: 1\r\nx-multi:  2 \r\nConnection: keep-alive\r\n\r\n",
	"HEAD /h HTTP/1.1\r\nhost: [::1]:80\r\ncookie: a\r\nCookie: b\r\nfoo_bar: baz\r\n\r\n",
	"GET //x HTTP/1.1\r\nHost: a\r\nEmpty:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
	"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\n: y\r\n\r\n",
}

// TestParseRequestTakes holds which requests this server takes on.
func TestParseRequestTakes(t *testing.T) {
	for i, s := range requestSeeds {
		took := parseRequest([]byte(s), nil) != nil
		want := i < 4
		if took != want {
			t.Errorf("%q: taken %v, want %v", s, took, want)
		}
	}
}

// FuzzRequestURL holds the URL of a target to url.ParseRequestURI's.
func FuzzRequestURL(f *testing.F) {
	for _, s := range []string{"/", "/a/b?c=d&e", "/a%20b", "/?", "/a?b?c", "/a#b", "/a?b#c", "//x", "/a!b", "/\xff?\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		got, gotErr := requestURL(target)
		want, wantErr := url.ParseRequestURI(target)
		if (gotErr == nil) != (wantErr == nil) || gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, %v; url.ParseRequestURI: %#v, %v", target, got, gotErr, want, wantErr)
		}
	})
}

// FuzzParseRequest holds every request parseRequest takes to what
// net/http's server reads of the same bytes.
func FuzzParseRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		end := bytes.Index(data, crlfcrlf)
		if end < 0 {
			return
		}
		head := data[:end+4]
		got := parseRequest(head, nil)
		if got == nil {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("taken, but net/http refuses %q: %v", head, err)
		}
		// What net/http's server checks after reading.
		if !httpguts.ValidHostHeader(want.Host) {
			t.Fatalf("taken with a host net/http's server refuses: %q", head)
		}
		for k, vv := range want.Header {
			if !httpguts.ValidHeaderFieldName(k) {
				t.Fatalf("taken with a field name net/http's server refuses: %q", head)
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("taken with a field value net/http's server refuses: %q", head)
				}
			}
		}
		delete(want.Header, "Host")
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.URL.String() != want.URL.String() ||
			got.Host != want.Host || got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor {
			t.Fatalf("%q: got %s %q %q %q %s, net/http %s %q %q %q %s", head, got.Method, got.RequestURI, got.URL, got.Host, got.Proto,
				want.Method, want.RequestURI, want.URL, want.Host, want.Proto)
		}
		if !reflect.DeepEqual(got.URL, want.URL) {
			t.Fatalf("%q: URL %#v, net/http %#v", head, got.URL, want.URL)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: header %v, net/http %v", head, got.Header, want.Header)
		}
		if want.Body != http.NoBody || want.ContentLength != 0 || want.Close || len(want.TransferEncoding) > 0 {
			t.Fatalf("%q: net/http reads a body or a close: %v %d %v", head, want.Body, want.ContentLength, want.Close)
		}
	})
}

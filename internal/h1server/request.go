package h1server

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// maxHeaderLines bounds the header fields of a request this server takes
// on; more go to the fallback, whose own limits apply.
const maxHeaderLines = 64

// parseRequest parses head, a request line and header fields ending with
// the empty line (CRLF CRLF), as net/http's server would, when it is a
// request this server takes on: HTTP/1.1, GET or HEAD, an origin-form
// target, exactly one valid Host, every line ending in CRLF, every field
// name and value valid, and no field that asks for more than a plain
// exchange (a body, 100-continue, an upgrade, a Connection other than
// keep-alive, a trailer, Pragma, which net/http rewrites). It returns nil
// for anything else, which the fallback then reads from its first byte;
// FuzzParseRequest holds the requests it takes to http.ReadRequest's
// reading of the same bytes.
//
// The request is a copy of base (when not nil) with the request's
// fields. The request's header is one string, the values slices of it, and the
// field names canonical strings (the common ones shared, not allocated).
func parseRequest(head []byte, base *http.Request) *http.Request {
	lineEnd := bytes.Index(head, crlf)
	if lineEnd < 0 {
		return nil
	}
	method, target, ok := requestLine(head[:lineEnd])
	if !ok {
		return nil
	}
	fields := head[lineEnd+2:]
	lines := bytes.Count(fields, crlf) - 1
	if lines < 1 || lines > maxHeaderLines {
		return nil
	}
	if bytes.Count(fields, lf) != lines+1 {
		// A bare line feed: net/http reads it as a line end.
		return nil
	}
	requestURI := string(target)
	u, err := requestURL(requestURI)
	if err != nil {
		return nil
	}
	all := string(fields)
	header := make(http.Header, lines)
	values := make([]string, lines)
	host := ""
	for rest := all; rest != "\r\n"; {
		line, next, _ := strings.Cut(rest, "\r\n")
		rest = next
		name, value, found := strings.Cut(line, ":")
		if !found || name == "" || !httpguts.ValidHeaderFieldName(name) {
			return nil
		}
		value = strings.Trim(value, " \t")
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil
		}
		key := canonicalKey(name)
		switch key {
		case "Content-Length", "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Pragma", "Http2-Settings":
			return nil
		case "Connection":
			if !strings.EqualFold(value, "keep-alive") {
				return nil
			}
		case "Host":
			if host != "" || value == "" || !httpguts.ValidHostHeader(value) {
				return nil
			}
			host = value
			// net/http's server takes Host out of the header.
			continue
		}
		if vv, ok := header[key]; ok {
			header[key] = append(vv, value)
			continue
		}
		values[0] = value
		header[key] = values[:1:1]
		values = values[1:]
	}
	if host == "" {
		return nil
	}
	r := new(http.Request)
	if base != nil {
		*r = *base
	}
	r.Method, r.URL, r.Proto, r.ProtoMajor, r.ProtoMinor = method, u, "HTTP/1.1", 1, 1
	r.Header, r.Body, r.Host, r.RequestURI = header, http.NoBody, host, requestURI
	return r
}

// requestURL is url.ParseRequestURI of an origin-form target, without
// its parsing for the common one: a path of characters that need no
// escaping and a query of printable ASCII.
func requestURL(target string) (*url.URL, error) {
	path, query, hasQuery := strings.Cut(target, "?")
	if hasQuery && query == "" {
		return url.ParseRequestURI(target)
	}
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			return url.ParseRequestURI(target)
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c <= ' ' || c >= 0x7f {
			return url.ParseRequestURI(target)
		}
	}
	return &url.URL{Path: path, RawQuery: query}, nil
}

// plainPathByte are the bytes of a path that url.URL keeps as they are.
var plainPathByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~$&+,/:;=@") {
		t[c] = true
	}
	return t
}()

var (
	crlf = []byte("\r\n")
	lf   = []byte("\n")
)

// requestLine takes "GET /path HTTP/1.1" and "HEAD /path HTTP/1.1".
func requestLine(line []byte) (method string, target []byte, ok bool) {
	switch {
	case bytes.HasPrefix(line, []byte("GET /")):
		method, target = http.MethodGet, line[4:]
	case bytes.HasPrefix(line, []byte("HEAD /")):
		method, target = http.MethodHead, line[5:]
	default:
		return "", nil, false
	}
	target, ok = bytes.CutSuffix(target, []byte(" HTTP/1.1"))
	if !ok || bytes.IndexByte(target, ' ') >= 0 {
		return "", nil, false
	}
	return method, target, true
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey of a valid field name,
// without a new string for the common names already canonical.
func canonicalKey(name string) string {
	if k, ok := commonKeys[name]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Type", "Cookie", "Dnt", "Host", "If-Modified-Since",
		"If-None-Match", "Origin", "Priority", "Referer", "Sec-Ch-Ua", "Sec-Ch-Ua-Mobile",
		"Sec-Ch-Ua-Platform", "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User",
		"Upgrade-Insecure-Requests", "User-Agent", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Real-Ip", "X-Request-Id", "Traceparent",
	} {
		m[k] = k
		m[strings.ToLower(k)] = k
	}
	return m
}()

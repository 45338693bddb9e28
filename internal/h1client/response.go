package h1client

import (
	"bufio"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// readResponse reads a response header from br, as http.ReadResponse
// does. The common response to a keep-alive request (HTTP/1.1, a final
// status with a body, framed by one Content-Length, nothing about the
// connection) is parsed here from the buffered bytes, with one string
// for the whole header and one slice for its values, where ReadResponse
// builds it line by line through a textproto.Reader. Anything else is
// left to ReadResponse, from the first byte: nothing is consumed until
// the header was taken. FuzzQuickResponse holds the two to the same
// result.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if resp := quickResponse(br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// quickResponse returns the response whose header is in br's buffer when
// it is one parseHead takes, and then consumes the header; nil otherwise,
// with nothing consumed. It reads nothing: a header not in the buffer
// whole is read by ReadResponse, which also answers a malformed line
// as soon as the line is in, where waiting for the rest of the header
// could wait for good.
func quickResponse(br *bufio.Reader, req *http.Request) *http.Response {
	if req.Method == http.MethodHead {
		// Its Content-Length frames no body: ReadResponse knows.
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	lineStart := 0
	for i, c := range buf {
		if c != '\n' {
			continue
		}
		if i == 0 || buf[i-1] != '\r' {
			// A bare line feed, which textproto takes for a line end:
			// its reading is ReadResponse's.
			return nil
		}
		if i-1 == lineStart && lineStart > 0 {
			resp := parseHead(buf[:i+1], req)
			if resp != nil {
				_, _ = br.Discard(i + 1)
				resp.Body = http.NoBody
				if resp.ContentLength > 0 {
					resp.Body = &lengthBody{r: br, n: resp.ContentLength}
				}
			}
			return resp
		}
		lineStart = i + 1
	}
	return nil
}

// parseHead parses head, a response header whose lines all end in CRLF
// (the last one empty), into a response without a body; nil when
// ReadResponse is to read it: a version other than HTTP/1.1, an
// informational status or one without a body (1xx, 204, 304), a line
// that is not a valid field, no Content-Length or more than one, or a
// field that ReadResponse acts on (Transfer-Encoding, Connection,
// Trailer, Pragma).
func parseHead(head []byte, req *http.Request) *http.Response {
	s := string(head)
	end := strings.Index(s, "\r\n")
	line := s[:end]
	if len(line) < 12 || line[:9] != "HTTP/1.1 " || !isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) ||
		len(line) > 12 && line[12] != ' ' {
		return nil
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	rest := s[end+2:]
	// Lines, less the empty one: at most that many fields.
	n := strings.Count(rest, "\n") - 1
	values := make([]string, n)
	h := make(http.Header, n)
	length := int64(-1)
	for i := 0; ; i++ {
		end := strings.Index(rest, "\r\n")
		line := rest[:end]
		rest = rest[end+2:]
		if line == "" {
			break
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return nil
		}
		key, v := line[:colon], line[colon+1:]
		canonical := true
		upper := true
		for j := 0; j < len(key); j++ {
			c := key[j]
			if !isTokenByte(c) {
				return nil
			}
			if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
				canonical = false
			}
			upper = c == '-'
		}
		if !canonical {
			key = textproto.CanonicalMIMEHeaderKey(key)
		}
		for j := 0; j < len(v); j++ {
			if !isValueByte(v[j]) {
				return nil
			}
		}
		v = strings.Trim(v, " \t")
		switch key {
		case "Content-Length":
			if length >= 0 || v == "" || len(v) > 18 {
				return nil
			}
			length = 0
			for j := 0; j < len(v); j++ {
				if !isDigit(v[j]) {
					return nil
				}
				length = length*10 + int64(v[j]-'0')
			}
		case "Transfer-Encoding", "Connection", "Trailer", "Pragma":
			return nil
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, v)
		} else {
			vv = values[i : i+1 : i+1]
			vv[0] = v
			h[key] = vv
		}
	}
	if length < 0 {
		return nil
	}
	return &http.Response{
		Status:        line[9:],
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: length,
		Request:       req,
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isTokenByte reports whether c may be in a field name (RFC 9110 tchar),
// as textproto checks it.
func isTokenByte(c byte) bool {
	return c < 0x80 && tokenBytes[c]
}

var tokenBytes = func() (t [0x80]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// isValueByte reports whether c may be in a field value as textproto
// takes it: visible ASCII, space, tab, and any byte from 0x80.
func isValueByte(c byte) bool {
	return c == '\t' || 0x20 <= c && c != 0x7f
}

// lengthBody is a body of a known length read from the connection's
// buffer, as net/http's body over a LimitReader: the end comes with the
// last bytes, and one earlier is io.ErrUnexpectedEOF.
type lengthBody struct {
	r *bufio.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

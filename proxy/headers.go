package proxy

import (
	"net/http"
	"reflect"

	"github.com/gmgate/gmgate/config"
)

// forwardingHeaders are the request headers gmgate sets on every request
// it forwards, besides the listener's session headers.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP"}

// spoofableHeaders returns the normalised names (see normalHeaderName) of
// every header gmgate sets on a listener's requests: a client's header
// that normalises to one of them is a forgery attempt. CGI, WSGI and PHP
// backends map X_Forwarded_For and X-Forwarded-For to the same variable,
// so removing the exact names alone would not do.
func spoofableHeaders(h config.SessionHeaders) []string {
	names := make([]string, 0, len(forwardingHeaders)+8)
	for _, n := range forwardingHeaders {
		names = append(names, normalHeaderName(n))
	}
	// Every session header, including any added to the type later.
	v := reflect.ValueOf(h)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
			names = append(names, normalHeaderName(f.String()))
		}
	}
	return names
}

// removeSpoofable deletes the headers of h whose names normalise to one
// of names.
func removeSpoofable(h http.Header, names []string) {
	for key := range h {
		for _, n := range names {
			if sameHeaderName(key, n) {
				delete(h, key)
				break
			}
		}
	}
}

// normalHeaderName is a header name as a CGI-style backend sees it:
// case and the difference between '_' and '-' do not count.
func normalHeaderName(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = normalHeaderByte(c)
	}
	return string(b)
}

// sameHeaderName reports whether key normalises to normal, without
// allocating.
func sameHeaderName(key, normal string) bool {
	if len(key) != len(normal) {
		return false
	}
	for i := 0; i < len(key); i++ {
		if normalHeaderByte(key[i]) != normal[i] {
			return false
		}
	}
	return true
}

func normalHeaderByte(c byte) byte {
	switch {
	case c >= 'A' && c <= 'Z':
		return c + 'a' - 'A'
	case c == '_':
		return '-'
	}
	return c
}

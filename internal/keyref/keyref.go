// Package keyref holds the rules every package follows for the secrets
// of key references (file:…?password-env=…, sdf:…?pin-file=…): a
// reference is shown with its whole query hidden, and a password or PIN
// written into a reference, in whatever case or percent-encoding, is
// found so that it can be refused. It also says when a secret file's
// mode lets other users read it (LooseMode), for the packages that open
// those files to warn.
//
// It imports nothing of gmgate's, so that config (which must not open
// keys) and accel (which opens them) share the same rules.
package keyref

import "strings"

// Hidden replaces the query of a reference in Redact's result.
const Hidden = "REDACTED"

// Redact returns ref with everything after the first '?' replaced by
// Hidden, so that no parameter (secret or not, well-formed or not)
// reaches a message. A reference without a query is returned as is.
func Redact(ref string) string {
	path, _, ok := strings.Cut(ref, "?")
	if !ok {
		return ref
	}
	return path + "?" + Hidden
}

// SecretNames are the parameters whose values are secrets; references
// name the variable or file that holds them instead (NAME-env, NAME-file).
var SecretNames = []string{"pin", "password"}

// maxDecodes bounds how many layers of percent-encoding InlineSecret
// peels off.
const maxDecodes = 4

// InlineSecret reports whether the query of a key reference carries a
// secret written out (pin=… or password=…) and which one. Names are
// matched without regard to case, after percent-decoding (repeatedly, so
// that "pin%3D1234" and "%2570in=1234" are found too), so that a
// parameter no backend would read still cannot hide a secret in the file.
func InlineSecret(query string) (string, bool) {
	s := query
	for range maxDecodes {
		if name, ok := findSecret(s); ok {
			return name, true
		}
		d := unescape(s)
		if d == s {
			break
		}
		s = d
	}
	return findSecret(s)
}

// findSecret looks for NAME= or a bare NAME among the &- or ;-separated
// parameters of s.
func findSecret(s string) (string, bool) {
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		for _, secret := range SecretNames {
			if strings.EqualFold(name, secret) {
				return secret, true
			}
		}
	}
	return "", false
}

// unescape decodes %XX escapes and '+' (as a query does), leaving
// malformed escapes as they are.
func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

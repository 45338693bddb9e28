// Package hostname is the one parser and normaliser of host names: the
// Host header, the HTTP/2 :authority, the host of an absolute-form
// request target and the server name of a ClientHello (SNI) all go
// through it, and so do the host names of the configuration, so that
// the name that chose a connection's site, the name that chose a
// request's site and the name that chose its route are the same name.
// It is a leaf of its own so that config (which checks the names of the
// file) and route (which chooses sites and routes) share it.
//
// It must not do I/O, log or know configuration files: its functions run
// for every request and every handshake, and they do not allocate for a
// name that is already in canonical form.
//
// The canonical form of a host is lower case, without a trailing dot:
// "Pay.Example.CN." and "pay.example.cn" are one name, as they are for
// DNS, and a site or route for one serves the other (nginx strips the
// dot too). Only one trailing dot is taken off; "pay.example.cn.." is
// not a host name. A port stays as it was sent.
package hostname

import (
	"net/netip"
	"strings"
)

// Host is a request's host, valid and in canonical form.
type Host struct {
	// Authority is host[:port], as it is forwarded in the Host header.
	Authority string
	// Name is the host without its port: a DNS name, a dotted IPv4
	// address, or an IPv6 address in brackets ("[::1]"). Sites and
	// routes match it; it is Authority's prefix.
	Name string
	// Port is the port's digits, "" when the authority has none.
	Port string
}

// maxName is the longest DNS name without its trailing dot (RFC 1035
// §2.3.4: 255 bytes on the wire).
const maxName = 253

// maxAuthority bounds an authority: the longest name, a dot, a colon
// and five digits; an IPv6 literal is shorter.
const maxAuthority = maxName + 1 + 1 + 5

// ParseAuthority parses the authority of a request (RFC 3986 §3.2.2,
// without userinfo): a host with an optional port, as the Host header,
// :authority and an absolute-form target carry it. The host is a DNS
// name (letters, digits, '-' and '_' in labels of at most 63 bytes,
// upper case and one trailing dot allowed), a dotted IPv4 address (four
// decimal parts without leading zeros), or an IPv6 address in brackets
// without a zone; the port, when there is a colon, is a number from 1 to
// 65535 without leading zeros. Anything else, such as "host:1:2",
// "host:", "host::", a percent-encoded or non-ASCII name, userinfo,
// spaces or control characters, a name whose last label is a number but
// which is not an IPv4 address ("1.2.3", "0x7f.1"), is not valid: ok is
// false. The empty string is not valid either: a request without a host
// is its caller's to judge.
//
// It allocates only when the authority is not canonical (upper case, a
// trailing dot), for the canonical copy.
func ParseAuthority(s string) (h Host, ok bool) {
	if s == "" || len(s) > maxAuthority {
		return Host{}, false
	}
	var host, port string
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 || !validIPv6(s[1:end]) {
			return Host{}, false
		}
		host = s[:end+1]
		if rest := s[end+1:]; rest != "" {
			if rest[0] != ':' {
				return Host{}, false
			}
			port = rest[1:]
			if !validPort(port) {
				return Host{}, false
			}
		}
	} else {
		host = s
		if i := strings.IndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i+1:]
			if !validPort(port) {
				return Host{}, false
			}
		}
		if !validName(host) {
			return Host{}, false
		}
	}
	if !hasUpper(host) && !strings.HasSuffix(host, ".") {
		return Host{Authority: s, Name: host, Port: port}, true
	}
	return canonicalHost(host, port), true
}

// canonicalHost builds the canonical authority of a valid host and port
// in one allocation.
func canonicalHost(host, port string) Host {
	host = strings.TrimSuffix(host, ".")
	n := len(host)
	if port != "" {
		n += 1 + len(port)
	}
	b := make([]byte, 0, n)
	for i := 0; i < len(host); i++ {
		b = append(b, lower(host[i]))
	}
	if port != "" {
		b = append(b, ':')
		b = append(b, port...)
	}
	auth := string(b)
	h := Host{Authority: auth, Name: auth[:len(host)]}
	if port != "" {
		h.Port = auth[len(host)+1:]
	}
	return h
}

// ParseServerName parses the server name of a ClientHello (SNI): a DNS
// name or a dotted IPv4 address as ParseAuthority takes them, without a
// port or brackets (RFC 6066 §3 allows neither, nor IP addresses, which
// some clients send all the same). It returns the canonical name; ""
// (no server name) is valid and stays "". It allocates only for a name
// with upper case or a trailing dot.
func ParseServerName(s string) (name string, ok bool) {
	if s == "" {
		return "", true
	}
	if !validName(s) {
		return "", false
	}
	if !hasUpper(s) && !strings.HasSuffix(s, ".") {
		return s, true
	}
	return canonicalHost(s, "").Name, true
}

// Pattern is the canonical form of a host name or wildcard of the
// configuration ("*.Example.CN." is "*.example.cn"), to compare with the
// names ParseAuthority and ParseServerName return.
func Pattern(s string) string {
	s = strings.TrimSuffix(s, ".")
	if !hasUpper(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// Match reports whether the canonical name matches the canonical pattern:
// the same name, or for a wildcard "*.example.cn" any name that ends in
// ".example.cn" with at least one label before it.
func Match(pattern, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return len(name) > len(suffix) && strings.HasSuffix(name, suffix)
	}
	return pattern == name
}

// validName reports whether s is a DNS name or a dotted IPv4 address,
// with at most one trailing dot and in any case.
func validName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > maxName {
		return false
	}
	label, lastStart := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label, lastStart = 0, i+1
			continue
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	if label == 0 {
		return false
	}
	// A name whose last label is a number is read as an IPv4 address by
	// resolvers and URL parsers ("127.1", "0x7f.1" with a hex label,
	// "010.0.0.1" in octal): only the four plain decimal parts are taken,
	// so that no upstream reads another address than gmgate did.
	if last := s[lastStart:]; allDigits(last) || len(last) > 1 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return validIPv4(s)
	}
	return true
}

// validIPv4 reports whether s is four decimal numbers of 0 to 255
// without leading zeros, separated by dots.
func validIPv4(s string) bool {
	for part := 0; part < 4; part++ {
		i := 0
		n := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			if i > 0 && s[0] == '0' {
				return false // a leading zero
			}
			n = n*10 + int(s[i]-'0')
			if n > 255 {
				return false
			}
			i++
		}
		if i == 0 {
			return false
		}
		s = s[i:]
		if part < 3 {
			if s == "" || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
	}
	return s == ""
}

// validIPv6 reports whether s (between the brackets) is an IPv6 address
// without a zone (RFC 6874 zones have no place in a Host header).
func validIPv6(s string) bool {
	if s == "" || len(s) > len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == ':' || c == '.') {
			return false
		}
	}
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6()
}

// validPort reports whether s is a port number from 1 to 65535 without
// leading zeros.
func validPort(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' || !allDigits(s) {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

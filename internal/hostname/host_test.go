package hostname

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// hostCases are authorities with their canonical form ("" for invalid).
var hostCases = []struct{ in, want string }{
	{"pay.test", "pay.test"},
	{"pay.test:443", "pay.test:443"},
	{"PAY.Test", "pay.test"},
	{"Pay.Test.:8443", "pay.test:8443"},
	{"pay.test.", "pay.test"},
	{"a_b-c.example.cn", "a_b-c.example.cn"},
	{"localhost", "localhost"},
	{"10.0.0.1", "10.0.0.1"},
	{"10.0.0.1:80", "10.0.0.1:80"},
	{"0.0.0.0", "0.0.0.0"},
	{"255.255.255.255:65535", "255.255.255.255:65535"},
	{"[::1]", "[::1]"},
	{"[::1]:443", "[::1]:443"},
	{"[FE80::1]:1", "[fe80::1]:1"},
	{"[::ffff:10.0.0.1]", "[::ffff:10.0.0.1]"},
	{"pay.test:1", "pay.test:1"},
	{strings.Repeat("a", 63) + ".test", strings.Repeat("a", 63) + ".test"},

	// Several colons, empty and odd ports.
	{"pay.test:1:2", ""},
	{"pay.test::", ""},
	{"pay.test:80:", ""},
	{"pay.test:", ""},
	{":", ""},
	{":443", ""},
	{"pay.test:http", ""},
	{"pay.test:0", ""},
	{"pay.test:080", ""},
	{"pay.test:65536", ""},
	{"pay.test:999999", ""},
	{"pay.test:+80", ""},
	{"pay.test:-1", ""},
	{"pay.test:8 0", ""},
	// Brackets and IPv6 literals.
	{"::1", ""},
	{"[::1", ""},
	{"::1]", ""},
	{"[]", ""},
	{"[]:80", ""},
	{"[pay.test]", ""},
	{"[pay.test]:80", ""},
	{"[10.0.0.1]", ""},
	{"[::1]:", ""},
	{"[::1]80", ""},
	{"[::1]:1:2", ""},
	{"[::1]]", ""},
	{"[[::1]]", ""},
	{"[fe80::1%25eth0]", ""},
	{"[fe80::1%eth0]:80", ""},
	{"[v1.fe]", ""},
	{"[::g]", ""},
	{"[1:2:3:4:5:6:7:8:9]", ""},
	{"2001:db8::1", ""},
	// Percent-encoding, userinfo, other characters.
	{"pay%2etest", ""},
	{"pay.test%3a443", ""},
	{"%70ay.test", ""},
	{"user@pay.test", ""},
	{"user:pw@pay.test:443", ""},
	{"pay.test@open.test", ""},
	{"pay.test/x", ""},
	{"pay.test?x", ""},
	{"pay.test#x", ""},
	{"pay.test\\x", ""},
	{"pay.test,open.test", ""},
	{"pay.test;x", ""},
	{"*.pay.test", ""},
	{"pay.tést", ""},
	{"pay.test\xff", ""},
	// Whitespace and control characters.
	{" pay.test", ""},
	{"pay.test ", ""},
	{"pay .test", ""},
	{"pay.test\t", ""},
	{"pay.test\r\nX: y", ""},
	{"pay.test\x00", ""},
	{"pay.test\x00.open.test", ""},
	{"pay.test\x7f", ""},
	{"pay.test:\x0080", ""},
	// Dots and labels.
	{"", ""},
	{".", ""},
	{"..", ""},
	{"pay.test..", ""},
	{".pay.test", ""},
	{"pay..test", ""},
	{strings.Repeat("a", 64) + ".test", ""},
	{strings.Repeat("a.", 127) + "test", ""},
	// Numbers that resolvers read as other addresses.
	{"1.2.3", ""},
	{"127.1", ""},
	{"010.0.0.1", ""},
	{"10.0.0.01", ""},
	{"0x7f.0.0.1", ""},
	{"0x7f000001", ""},
	{"pay.0x7f", ""},
	{"2130706433", ""},
	{"256.0.0.1", ""},
	{"1.2.3.4.5", ""},
	{"pay.123", ""},
}

func TestParseAuthority(t *testing.T) {
	for _, c := range hostCases {
		h, ok := ParseAuthority(c.in)
		if ok != (c.want != "") || h.Authority != c.want {
			t.Errorf("ParseAuthority(%q) = %q, %v; want %q", c.in, h.Authority, ok, c.want)
			continue
		}
		if !ok {
			continue
		}
		// Name and Port are the parts of Authority.
		want := h.Name
		if h.Port != "" {
			want += ":" + h.Port
		}
		if want != h.Authority || strings.HasPrefix(h.Name, "[") != strings.HasPrefix(c.in, "[") {
			t.Errorf("ParseAuthority(%q) = %+v: parts do not make the authority", c.in, h)
		}
		// The canonical form is its own canonical form.
		if again, ok := ParseAuthority(h.Authority); !ok || again != h {
			t.Errorf("ParseAuthority(%q) = %+v, %v; not canonical", h.Authority, again, ok)
		}
	}
}

func TestParseServerName(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"pay.test":      "pay.test",
		"PAY.TEST":      "pay.test",
		"pay.test.":     "pay.test",
		"10.0.0.1":      "10.0.0.1",
		"pay.test:443":  "!",
		"[::1]":         "!",
		"::1":           "!",
		"pay.test:1:2":  "!",
		"bad name":      "!",
		"pay.test\x00":  "!",
		"127.1":         "!",
		"user@pay.test": "!",
	} {
		got, ok := ParseServerName(in)
		if want == "!" {
			if ok {
				t.Errorf("ParseServerName(%q) = %q, valid", in, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("ParseServerName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"pay.test", "pay.test", true},
		{"pay.test", "www.pay.test", false},
		{"*.pay.test", "www.pay.test", true},
		{"*.pay.test", "a.b.pay.test", true},
		{"*.pay.test", "pay.test", false},
		{"*.pay.test", "xpay.test", false},
		{Pattern("*.Pay.Test."), "www.pay.test", true},
		{Pattern("Pay.Test"), "pay.test", true},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}

// What every request and handshake runs does not allocate for a name
// already canonical.
func TestParseDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"pay.test", "pay.test:443", "10.0.0.1:80", "[::1]:443", "[2001:db8::1]"} {
		if n := testing.AllocsPerRun(100, func() { ParseAuthority(s) }); n != 0 {
			t.Errorf("ParseAuthority(%q) allocates %v times", s, n)
		}
		if n := testing.AllocsPerRun(100, func() { ParseServerName("pay.test") }); n != 0 {
			t.Errorf("ParseServerName allocates %v times", n)
		}
	}
	// Invalid ones are refused without allocating either.
	for _, s := range []string{"pay.test:1:2", "pay.test\x00", "[::1]:x"} {
		if n := testing.AllocsPerRun(100, func() { ParseAuthority(s) }); n != 0 {
			t.Errorf("ParseAuthority(%q) allocates %v times", s, n)
		}
	}
}

func BenchmarkParseAuthority(b *testing.B) {
	for _, s := range []string{"api.example.cn", "api.example.cn:8443", "API.Example.CN", "[2001:db8::1]:443"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseAuthority(s)
			}
		})
	}
}

// FuzzParseAuthority holds ParseAuthority to its promises: a valid
// authority's canonical form is its own, lower case, splits as
// net.SplitHostPort splits it, and names a host net/url would take; and
// nothing panics.
func FuzzParseAuthority(f *testing.F) {
	for _, c := range hostCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// A server name is an authority without a port or brackets.
		if name, ok := ParseServerName(s); ok && s != "" {
			if h, ok := ParseAuthority(s); !ok || h.Name != name || h.Port != "" {
				t.Fatalf("server name %q (%q) parses as authority %+v, %v", s, name, h, ok)
			}
		}
		h, ok := ParseAuthority(s)
		if !ok {
			if h != (Host{}) {
				t.Fatalf("invalid %q returned %+v", s, h)
			}
			return
		}
		if again, ok := ParseAuthority(h.Authority); !ok || again != h {
			t.Fatalf("%q: canonical %+v parses as %+v, %v", s, h, again, ok)
		}
		if h.Authority != strings.ToLower(h.Authority) || strings.HasSuffix(h.Name, ".") {
			t.Fatalf("%q: %q is not canonical", s, h.Authority)
		}
		if !strings.EqualFold(strings.TrimSuffix(strings.Replace(s, ".:", ":", 1), "."), h.Authority) {
			t.Fatalf("%q: canonical %q is another host", s, h.Authority)
		}
		host, port := h.Name, h.Port
		if port != "" {
			sh, sp, err := net.SplitHostPort(h.Authority)
			if err != nil || "["+sh+"]" != host && sh != host || sp != port {
				t.Fatalf("%q: SplitHostPort says %q %q %v, ParseAuthority %+v", s, sh, sp, err, h)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				t.Fatalf("%q: port %q", s, port)
			}
		}
		if strings.ContainsAny(host, "%@/?#\\ \t\r\n\x00") {
			t.Fatalf("%q: host %q", s, host)
		}
		if name, ok := ParseServerName(host); !strings.HasPrefix(host, "[") && (!ok || name != host) {
			t.Fatalf("%q: host %q is not a server name (%q, %v)", s, host, name, ok)
		}
	})
}

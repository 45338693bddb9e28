package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// shangMiFlight is the first flight of a TLS 1.3 ShangMi client for name,
// as records.
func shangMiFlight(t testing.TB, name string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		_ = tls13.Client(b, &tls13.Config{ServerName: name, InsecureSkipVerify: true, CurvePreferences: []tls13.CurveID{tls13.CurveSM2}}).Handshake()
	}()
	_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, flight, err := ReadClientHello(a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(flight)
}

// inRecords puts a handshake message into records of at most size bytes.
func inRecords(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, RecordTypeHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// withStandardSuite adds TLS_AES_128_GCM_SHA256 to a ClientHello message,
// as a client that speaks both kinds of TLS 1.3 offers it.
func withStandardSuite(t testing.TB, msg []byte) []byte {
	t.Helper()
	at := 4 + 2 + 32
	at += 1 + int(msg[at]) // session ID
	n := int(msg[at])<<8 | int(msg[at+1])
	out := append([]byte{}, msg[:at]...)
	out = append(out, byte((n+2)>>8), byte(n+2), 0x13, 0x01)
	out = append(out, msg[at+2:]...)
	body := len(out) - 4
	out[1], out[2], out[3] = byte(body>>16), byte(body>>8), byte(body)
	if _, ok := tls13.ParseClientHello(out); !ok {
		t.Fatal("the changed hello does not parse")
	}
	return out
}

func TestHelloMessage(t *testing.T) {
	flight := shangMiFlight(t, "sm.example")
	msg := helloMessage(flight)
	if msg == nil || len(msg) != len(flight)-RecordHeaderLen {
		t.Fatalf("message of %d bytes from a flight of %d", len(msg), len(flight))
	}
	for _, size := range []int{1, 3, 4, 5, 100} {
		split := inRecords(msg, size)
		if got := helloMessage(split); !bytes.Equal(got, msg) {
			t.Errorf("records of %d bytes: got %d bytes", size, len(got))
		}
		// Cut short: no message.
		if got := helloMessage(split[:len(split)-1]); got != nil {
			t.Errorf("records of %d bytes cut short: got %d bytes", size, len(got))
		}
	}
	// Bytes after the message (the next flight) are left out.
	if got := helloMessage(append(bytes.Clone(flight), 22, 3, 3, 0, 1, 0)); !bytes.Equal(got, msg) {
		t.Error("bytes after the hello changed the message")
	}
}

func TestRouteShangMi(t *testing.T) {
	msg := helloMessage(shangMiFlight(t, "sm.example"))
	both := inRecords(withStandardSuite(t, msg), 1<<14)
	only := inRecords(msg, 1<<14)
	other := inRecords(helloMessage(shangMiFlight(t, "other.example")), 1<<14)

	site := func(name string, tls13Conf bool, preferred, hasTLS bool) *route.Site {
		s := &route.Site{Name: name, Hosts: []string{name + ".example"}, TLS13Preferred: preferred}
		if tls13Conf {
			s.TLS13 = &tls13.Config{}
		}
		if hasTLS {
			s.TLS = &tls.Config{}
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		sites  []*route.Site
		flight []byte
		want   string // the site, "-" for crypto/tls, "" for refused
	}{
		{"prefer, ShangMi only", []*route.Site{site("sm", true, true, true)}, only, "sm"},
		{"prefer, both", []*route.Site{site("sm", true, true, true)}, both, "sm"},
		{"accept, ShangMi only", []*route.Site{site("sm", true, false, true)}, only, "sm"},
		{"accept, both", []*route.Site{site("sm", true, false, true)}, both, "-"},
		{"accept without a tls section, both", []*route.Site{site("sm", true, false, false)}, both, "sm"},
		{"off", []*route.Site{site("sm", false, false, true)}, only, "-"},
		{"unknown name, ShangMi only", []*route.Site{site("sm", true, true, true)}, other, ""},
		{"unknown name, both", []*route.Site{site("sm", true, true, true)}, inRecords(withStandardSuite(t, helloMessage(other)), 1<<14), "-"},
		{"unknown name, no ShangMi site", []*route.Site{site("sm", false, false, true)}, other, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := routeShangMi(route.NewSiteTable(tc.sites), &ReplayConn{Prefix: tc.flight})
			got := "-"
			switch {
			case ok && h.site != nil:
				got = h.site.Name
			case ok:
				got = ""
			}
			if got != tc.want {
				t.Errorf("routed to %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzHelloMessage: any first flight gives no message or one whole
// message of the length its header says, and never a panic.
func FuzzHelloMessage(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3})
	f.Add([]byte{22, 3, 1, 0, 2, 1, 0, 22, 3, 1, 0, 3, 0, 1, 0xaa})
	f.Add([]byte{22, 3, 1, 0xff, 0xff, 1})
	f.Add([]byte{23, 3, 3, 0, 1, 0})
	f.Add(inRecords([]byte{1, 0, 0, 5, 1, 2, 3, 4, 5}, 2))
	msg := helloMessage(shangMiFlight(f, "sm.example"))
	f.Add(msg)
	f.Add(withStandardSuite(f, msg))
	f.Fuzz(func(t *testing.T, flight []byte) {
		// The quick look at the suites agrees with the whole parse.
		if hello, ok := tls13.ParseClientHello(flight); ok {
			sm := slices.Contains(hello.CipherSuites, tls13.TLS_SM4_GCM_SM3) || slices.Contains(hello.CipherSuites, tls13.TLS_SM4_CCM_SM3)
			if sm != offersShangMiSuite(flight) {
				t.Fatalf("offersShangMiSuite = %v, the parsed suites %x", !sm, hello.CipherSuites)
			}
		}
		msg := helloMessage(flight)
		if msg == nil {
			return
		}
		if len(msg) < 4 || len(msg) != 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
			t.Fatalf("message of %d bytes with header %x", len(msg), msg[:min(4, len(msg))])
		}
	})
}

// A ShangMi-only hello for a name no site serves is refused with
// unrecognized_name by the ShangMi stack, and counted as such.
func TestShangMiUnknownName(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		defer b.Close()
		done <- tls13.Client(b, &tls13.Config{ServerName: "nobody.example", InsecureSkipVerify: true}).Handshake()
	}()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_, flight, err := ReadClientHello(a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sites := route.NewSiteTable([]*route.Site{{Name: "sm", Hosts: []string{"sm.example"}, TLS13: &tls13.Config{}}})
	c := &ReplayConn{Conn: a, Prefix: flight}
	h, ok := routeShangMi(sites, c)
	if !ok || h.site != nil {
		t.Fatalf("routed %v to %+v", ok, h)
	}
	info, site, _, err := handshakeShangMi(context.Background(), h, c)
	if site != nil || info.Protocol != ProtocolTLS13SM || info.SNI != "nobody.example" || HandshakeResult(err) != "alert_sent_unrecognized_name" {
		t.Fatalf("info %+v site %v result %s (%v)", info, site, HandshakeResult(err), err)
	}
	var ae *tls13.AlertError
	if cerr := <-done; !errors.As(cerr, &ae) || !ae.Remote || ae.Alert != tls13.AlertUnrecognizedName {
		t.Fatalf("client: %v", cerr)
	}
}

// standardFlight is the first flight of a crypto/tls client.
func standardFlight(tb testing.TB) []byte {
	tb.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		_ = tls.Client(b, &tls.Config{ServerName: "sm.example", InsecureSkipVerify: true}).Handshake()
	}()
	_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, flight, err := ReadClientHello(a, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(flight)
}

// BenchmarkRouteShangMi is what the ShangMi decision costs a TLS hello
// on a listener with a ShangMi site: a standard client's (a look at its
// suites) and a ShangMi client's (a whole parse).
func BenchmarkRouteShangMi(b *testing.B) {
	sites := route.NewSiteTable([]*route.Site{{Name: "sm", Hosts: []string{"sm.example"}, TLS13: &tls13.Config{}, TLS13Preferred: true, TLS: &tls.Config{}}})
	for _, bc := range []struct {
		name   string
		flight []byte
		want   bool
	}{{"standard", standardFlight(b), false}, {"shangmi", shangMiFlight(b, "sm.example"), true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &ReplayConn{Prefix: bc.flight}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := routeShangMi(sites, c); ok != bc.want {
					b.Fatal("routed the wrong way")
				}
			}
		})
	}
}

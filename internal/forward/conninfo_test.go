package forward

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/observe"
)

// slogLine is what slog's JSON handler writes for a line at t.
func slogLine(t *testing.T, at time.Time, msg string, attrs []slog.Attr) string {
	t.Helper()
	var b bytes.Buffer
	r := slog.NewRecord(at, slog.LevelInfo, msg, 0)
	r.AddAttrs(attrs...)
	if err := slog.NewJSONHandler(&b, nil).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// accessStrings are field values that need every kind of escaping.
var accessStrings = []string{
	"", "edge", "a\"b\\c", "line\nbreak\r\ttab", "\x00\x01\x1f\x7f", "<script>&amp;",
	"中文路径", "\u2028\u2029", "bad\xffutf8\xc3", "emoji 😀", "/p?q=1&r=%20", strings.Repeat("x", 3000),
}

func randomAccessString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return accessStrings[r.IntN(len(accessStrings))]
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

// The access log's own encoder writes what slog's JSON handler writes for
// the same fields, byte for byte.
func TestAccessLineMatchesSlog(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.FixedZone("CST", 8*3600), time.FixedZone("", -(3*3600 + 1800))}
	for i := range 2000 {
		at := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[i%len(zones)])
		if i%7 == 0 {
			at = at.Truncate(time.Second)
		}
		ci := &ConnInfo{
			Listener: randomAccessString(r), Site: randomAccessString(r), SNI: randomAccessString(r),
			Protocol: randomAccessString(r), Suite: randomAccessString(r), Resumed: r.IntN(2) == 0,
			Handshake: time.Duration(r.Int64N(int64(10 * time.Second))),
		}
		if i%5 != 0 {
			ci.Client = &net.TCPAddr{IP: net.IPv4(byte(r.IntN(256)), 0, 0, 1), Port: r.IntN(65536)}
		}
		durations := []time.Duration{0, time.Microsecond, 999 * time.Microsecond, time.Duration(r.Int64N(int64(time.Hour))), 1e15}
		rl := &observe.RequestLine{
			Proto: randomAccessString(r), Method: randomAccessString(r), Host: randomAccessString(r),
			Path: randomAccessString(r), Status: r.IntN(1000) - 1, Bytes: r.Int64N(1 << 40),
			Upstream: randomAccessString(r), Target: randomAccessString(r), UserAgent: randomAccessString(r),
			Duration: durations[r.IntN(len(durations))],
		}
		e := observe.EncodeRequestLine(at, ci, rl)
		got := string(e.End())
		e.Free()
		if want := slogLine(t, at, "request", rl.Attrs(ci)); got != want {
			t.Fatalf("request line %d:\n got %s\nwant %s", i, got, want)
		}
		tl := &observe.TCPLine{Upstream: randomAccessString(r), Target: randomAccessString(r), In: r.Int64N(1 << 40),
			Out: r.Int64N(1 << 40), Duration: durations[r.IntN(len(durations))]}
		if i%2 == 0 {
			tl.Err = errors.New(randomAccessString(r))
		}
		e = observe.EncodeTCPLine(at, ci, tl)
		got = string(e.End())
		e.Free()
		if want := slogLine(t, at, "tcp", tl.Attrs(ci)); got != want {
			t.Fatalf("tcp line %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzAccessString(f *testing.F) {
	for _, s := range accessStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		at := time.Unix(1700000000, 123456789).UTC()
		ci := &ConnInfo{Listener: s, SNI: s}
		rl := &observe.RequestLine{Path: s, UserAgent: s}
		e := observe.EncodeRequestLine(at, ci, rl)
		got := string(e.End())
		e.Free()
		if want := slogLine(t, at, "request", rl.Attrs(ci)); got != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkAccessLine(b *testing.B) {
	ci := &ConnInfo{Listener: "edge", Site: "default", Client: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 51234},
		SNI: "api.example.cn", Protocol: "tlcp", Suite: "ECC_SM4_GCM_SM3", Handshake: 1234 * time.Microsecond}
	rl := &observe.RequestLine{Proto: "HTTP/1.1", Method: "GET", Host: "api.example.cn", Path: "/v1/items/42", Status: 200,
		Bytes: 1024, Upstream: "app", Target: "10.0.0.5:8080", UserAgent: "Mozilla/5.0 (X11; Linux x86_64)", Duration: 812 * time.Microsecond}
	b.Run("encoder", func(b *testing.B) {
		a := &observe.AccessLog{Out: observe.NewBufferedLog(discard{}, time.Hour)}
		b.ReportAllocs()
		for b.Loop() {
			a.Request(ci, rl)
		}
	})
	b.Run("slog", func(b *testing.B) {
		a := &observe.AccessLog{Logger: slog.New(slog.NewJSONHandler(discard{}, nil))}
		b.ReportAllocs()
		for b.Loop() {
			a.Request(ci, rl)
		}
	})
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

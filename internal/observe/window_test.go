package observe

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestWindowMinutes counts into minutes and sums the last 1, 15 and 60
// of them as the clock moves.
func TestWindowMinutes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	w := NewWindow()
	w.now = func() time.Time { return now }
	w.Connection("api", "tlcp", "ECC_SM4_GCM_SM3")
	w.Request("api", "tlcp", "ECC_SM4_GCM_SM3")
	now = now.Add(10 * time.Minute)
	w.Connection("api", "tlcp", "ECC_SM4_GCM_SM3")
	w.Connection("api", "tls1.3", "TLS_AES_128_GCM_SHA256")
	w.OfferedGM("api")

	sum := func(minutes int) (conns, reqs, gm uint64) {
		for _, c := range w.Counts(minutes) {
			conns += c.Connections
			reqs += c.Requests
			gm += c.OfferedGM
		}
		return
	}
	if c, r, g := sum(1); c != 2 || r != 0 || g != 1 {
		t.Errorf("last minute: %d %d %d", c, r, g)
	}
	if c, r, _ := sum(15); c != 3 || r != 1 {
		t.Errorf("last 15 minutes: %d %d", c, r)
	}
	now = now.Add(55 * time.Minute)
	if c, _, _ := sum(60); c != 2 {
		t.Errorf("an hour after the first: %d connections, want the 2 of 55 minutes ago", c)
	}
	// A bucket an hour old is reused for the new minute, not added to.
	now = now.Add(5 * time.Minute)
	w.Connection("api", "tlcp", "ECC_SM4_GCM_SM3")
	if c, _, _ := sum(60); c != 1 {
		t.Errorf("after the hour turned: %d connections, want 1", c)
	}
	got := w.Counts(60)
	if len(got) != 1 || got[0].Site != "api" || got[0].Protocol != "tlcp" {
		t.Errorf("series: %+v", got)
	}
}

func TestWindowBoundsSeries(t *testing.T) {
	w := NewWindow()
	for i := range 2 * maxWindowSeries {
		w.Connection(strings.Repeat("s", i%300)+string(rune('a'+i%26)), "tlcp", "x")
	}
	n := len(w.series)
	if n > maxWindowSeries+1 {
		t.Errorf("%d series kept", n)
	}
	var total uint64
	for _, c := range w.Counts(1) {
		total += c.Connections
	}
	if total != 2*maxWindowSeries {
		t.Errorf("%d connections counted of %d", total, 2*maxWindowSeries)
	}
}

func TestFailureRing(t *testing.T) {
	r := NewFailureRing(3)
	for i := range 5 {
		r.Add(HandshakeFailure{Listener: string(rune('a' + i))})
	}
	got, total := r.Recent()
	if total != 5 || len(got) != 3 || got[0].Listener != "e" || got[2].Listener != "c" {
		t.Errorf("%d %+v", total, got)
	}
}

// FuzzSafeText: whatever a client sends as a name, what is kept is valid
// UTF-8 without control characters or markup, and bounded.
func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"api.example.cn", "<b>x</b>", "a\x00b\x1b[31m", "\xff\xfe", "中文.example.cn", strings.Repeat("\\", 300), `"quoted"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := SafeText(s)
		if !utf8.ValidString(out) {
			t.Fatalf("%q: invalid UTF-8 %q", s, out)
		}
		if len(out) > maxFailureText+len("…") {
			t.Fatalf("%q: %d bytes", s, len(out))
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || r == '<' || r == '>' || r == '"' {
				t.Fatalf("%q: kept %q in %q", s, r, out)
			}
		}
	})
}

// A request counted into the window allocates nothing.
func TestWindowRequestAllocs(t *testing.T) {
	w := NewWindow()
	site, proto, suite := "api", "tlcp", "ECC_SM4_GCM_SM3"
	w.Request(site, proto, suite)
	if n := testing.AllocsPerRun(100, func() { w.Request(site, proto, suite) }); n != 0 {
		t.Errorf("%v allocations a request", n)
	}
}

func BenchmarkWindowRequest(b *testing.B) {
	w := NewWindow()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Request("api", "tlcp", "ECC_SM4_GCM_SM3")
		}
	})
}

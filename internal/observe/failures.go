package observe

import (
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// HandshakeFailure is one failed client handshake as the admin API shows
// it: what the log line says, no more. Names the client chose (the
// server name) are escaped and cut, and no key, secret or handshake
// bytes are kept.
type HandshakeFailure struct {
	Time     time.Time `json:"time"`
	Listener string    `json:"listener"`
	Client   string    `json:"client"`
	Protocol string    `json:"protocol"`
	Result   string    `json:"result"`
	SNI      string    `json:"sni,omitempty"`
	Site     string    `json:"site,omitempty"`
	Alert    string    `json:"alert,omitempty"`
	Cause    string    `json:"cause"`
	// DurationMS is how long the handshake ran before it failed.
	DurationMS float64 `json:"duration_ms"`
}

// maxFailureText bounds each text field of a kept failure.
const maxFailureText = 256

// FailureRing keeps the last failed handshakes, a fixed number of them:
// a flood of failures overwrites the oldest rather than growing it.
type FailureRing struct {
	mu    sync.Mutex
	buf   []HandshakeFailure
	next  int
	full  bool
	total uint64
}

// NewFailureRing keeps the last n failures (at least 1).
func NewFailureRing(n int) *FailureRing {
	return &FailureRing{buf: make([]HandshakeFailure, max(n, 1))}
}

// Add keeps f, escaping and cutting its texts.
func (r *FailureRing) Add(f HandshakeFailure) {
	f.Listener = SafeText(f.Listener)
	f.Client = SafeText(f.Client)
	f.Protocol = SafeText(f.Protocol)
	f.Result = SafeText(f.Result)
	f.SNI = SafeText(f.SNI)
	f.Site = SafeText(f.Site)
	f.Alert = SafeText(f.Alert)
	f.Cause = SafeText(f.Cause)
	r.mu.Lock()
	r.buf[r.next] = f
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	r.total++
	r.mu.Unlock()
}

// Recent returns the kept failures, newest first, and how many were
// added in all.
func (r *FailureRing) Recent() ([]HandshakeFailure, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]HandshakeFailure, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out, r.total
}

// SafeText makes a name that came from the network fit to show: control
// characters, invalid UTF-8 and quotes escaped as Go would quote them,
// and cut to a bound, marked with "…" where it was cut.
func SafeText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' {
			clean = false
			break
		}
	}
	if !clean {
		q := strconv.QuoteToGraphic(s)
		s = q[1 : len(q)-1]
		s = strings.NewReplacer(`\"`, `\x22`, "<", `\x3c`, ">", `\x3e`).Replace(s)
	}
	if len(s) > maxFailureText {
		cut := maxFailureText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

package observe

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// logBurst is how many lines of one kind (handshake failures of a
// listener, upstream failures of a pool) are written each second; the
// rest are counted and summed up in one line.
const LogBurst = 10

// rateLimitedLog writes the first logBurst lines of each second and
// counts the others; at the end of a second in which lines were dropped it
// writes one summary line with their number, so that a flood of failures
// cannot fill the disk and yet leaves a trace of its size.
type RateLimitedLog struct {
	log     *slog.Logger
	level   slog.Level
	summary string // message of the summary line
	attrs   []any  // of the summary line

	mu         sync.Mutex
	windowEnd  time.Time
	written    int
	suppressed int
	flushing   bool
}

func NewRateLimitedLog(log *slog.Logger, level slog.Level, summary string, attrs ...any) *RateLimitedLog {
	return &RateLimitedLog{log: log, level: level, summary: summary, attrs: attrs}
}

// Log writes a line, or counts it when this second's lines are used up.
func (l *RateLimitedLog) Log(msg string, attrs ...slog.Attr) {
	if !l.log.Enabled(context.Background(), l.level) {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if now.After(l.windowEnd) {
		l.windowEnd = now.Add(time.Second)
		l.written = 0
	}
	if l.written < LogBurst {
		l.written++
		l.mu.Unlock()
		l.log.LogAttrs(context.Background(), l.level, msg, attrs...)
		return
	}
	l.suppressed++
	if !l.flushing {
		l.flushing = true
		time.AfterFunc(l.windowEnd.Sub(now), l.Flush)
	}
	l.mu.Unlock()
}

func (l *RateLimitedLog) Flush() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.flushing = false
	l.mu.Unlock()
	if n > 0 {
		l.log.Log(context.Background(), l.level, l.summary, append(slices.Clip(l.attrs), "suppressed", n)...)
	}
}

// stdLogWriter turns the lines that net/http writes through a log.Logger
// (http.Server's and ReverseProxy's ErrorLog, and http.Transport's
// log.Printf to the standard logger) into records of the JSON process
// log at warn, a few a second.
type StdLogWriter struct{ lines *RateLimitedLog }

func NewStdLogWriter(log *slog.Logger) *StdLogWriter {
	return &StdLogWriter{lines: NewRateLimitedLog(log, slog.LevelWarn, "net/http lines not logged")}
}

func (w *StdLogWriter) Write(p []byte) (int, error) {
	w.lines.Log("net/http", slog.String("error", strings.TrimSpace(string(p))))
	return len(p), nil
}

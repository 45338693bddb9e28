package observe

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The access log is a line of JSON per request (or TCP connection), with
// the fields of slog's JSON handler (time, level, msg) followed by the
// line's own. A busy gateway writes tens of thousands of lines a second,
// so the lines are encoded here, without slog's attribute values and
// reflection, into a buffer that is written out when it fills or
// accessFlushDelay after its first line: one write for many lines instead
// of one per request. A logger given in Options gets the same fields
// through slog.

// accessFlushDelay is how long a line may wait in the buffer before it is
// written; shutdown and a reopen (log rotation) write the buffer at once.
const AccessFlushDelay = 100 * time.Millisecond

// accessBufferSize is how much is written at most in one write.
const accessBufferSize = 64 << 10

// accessLog writes the access log: encoded here into a bufferedLog, or
// through a slog.Logger given in Options.
type AccessLog struct {
	Out    *bufferedLog
	Logger *slog.Logger
}

// requestLine is what the access log says of an HTTP request, besides the
// connection's fields.
type RequestLine struct {
	Proto, Method, Host, Path string
	Status                    int
	Bytes                     int64
	Upstream, Target          string
	UserAgent                 string
	Duration                  time.Duration
}

// tcpLine is what the access log says of a TCP connection forwarded
// whole, besides the connection's fields.
type TCPLine struct {
	Upstream, Target string
	In, Out          int64
	Duration         time.Duration
	Err              error
}

func (a *AccessLog) Request(ci ConnFields, l *RequestLine) {
	if a.Logger != nil {
		a.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request", l.Attrs(ci)...)
		return
	}
	e := EncodeRequestLine(time.Now(), ci, l)
	a.Out.Write(e.End())
	e.Free()
}

func (a *AccessLog) TCP(ci ConnFields, l *TCPLine) {
	if a.Logger != nil {
		a.Logger.LogAttrs(context.Background(), slog.LevelInfo, "tcp", l.Attrs(ci)...)
		return
	}
	e := EncodeTCPLine(time.Now(), ci, l)
	a.Out.Write(e.End())
	e.Free()
}

// fieldWriter takes the fields of an access log line: lineEncoder writes
// them as slog's JSON handler would, attrList makes slog attributes of
// them. Each kind of line lists its fields once, in fields.
type FieldWriter interface {
	Str(key, v string)
	int(key string, v int64)
	Bool(key string, v bool)
	Float(key string, v float64)
}

// ConnFields writes the fields that describe a connection, first on
// each of its lines.
type ConnFields interface {
	Fields(w FieldWriter)
}

// fields are a request's fields, after its connection's.
func (l *RequestLine) Fields(ci ConnFields, w FieldWriter) {
	ci.Fields(w)
	w.Str("http", l.Proto)
	w.Str("method", l.Method)
	w.Str("host", l.Host)
	w.Str("path", l.Path)
	w.int("status", int64(l.Status))
	w.int("bytes", l.Bytes)
	w.Str("upstream", l.Upstream)
	w.Str("target", l.Target)
	w.Str("user_agent", l.UserAgent)
	w.Float("duration_ms", Millis(l.Duration))
}

// fields are a TCP connection's fields, after its connection's.
func (l *TCPLine) Fields(ci ConnFields, w FieldWriter) {
	ci.Fields(w)
	w.Str("upstream", l.Upstream)
	w.Str("target", l.Target)
	w.int("bytes_in", l.In)
	w.int("bytes", l.Out)
	w.Float("duration_ms", Millis(l.Duration))
	if l.Err != nil {
		w.Str("error", l.Err.Error())
	}
}

// attrs are the fields of a request's line for a slog.Logger.
func (l *RequestLine) Attrs(ci ConnFields) []slog.Attr {
	var a attrList
	l.Fields(ci, &a)
	return a
}

// attrs are the fields of a TCP connection's line for a slog.Logger.
func (l *TCPLine) Attrs(ci ConnFields) []slog.Attr {
	var a attrList
	l.Fields(ci, &a)
	return a
}

// encodeRequestLine encodes a request's line; free it after use.
func EncodeRequestLine(t time.Time, ci ConnFields, l *RequestLine) *lineEncoder {
	e := newLineEncoder("request", t)
	l.Fields(ci, e)
	return e
}

// encodeTCPLine encodes a TCP connection's line; free it after use.
func EncodeTCPLine(t time.Time, ci ConnFields, l *TCPLine) *lineEncoder {
	e := newLineEncoder("tcp", t)
	l.Fields(ci, e)
	return e
}

// attrList collects fields as slog attributes.
type attrList []slog.Attr

func (a *attrList) Str(key, v string)           { *a = append(*a, slog.String(key, v)) }
func (a *attrList) int(key string, v int64)     { *a = append(*a, slog.Int64(key, v)) }
func (a *attrList) Bool(key string, v bool)     { *a = append(*a, slog.Bool(key, v)) }
func (a *attrList) Float(key string, v float64) { *a = append(*a, slog.Float64(key, v)) }

// lineEncoder appends one access log line as slog's JSON handler writes
// it.
type lineEncoder struct{ b []byte }

var lineEncoders = sync.Pool{New: func() any { return &lineEncoder{b: make([]byte, 0, 1024)} }}

func newLineEncoder(msg string, t time.Time) *lineEncoder {
	e := lineEncoders.Get().(*lineEncoder)
	e.b = append(e.b[:0], `{"time":"`...)
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, `","level":"INFO"`...)
	e.Str("msg", msg)
	return e
}

// key starts a field; keys are plain names that need no escaping.
func (e *lineEncoder) key(k string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *lineEncoder) Str(key, v string) {
	e.key(key)
	e.b = append(e.b, '"')
	e.b = appendJSONString(e.b, v)
	e.b = append(e.b, '"')
}

func (e *lineEncoder) int(key string, v int64) {
	e.key(key)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *lineEncoder) Bool(key string, v bool) {
	e.key(key)
	e.b = strconv.AppendBool(e.b, v)
}

// float writes f as encoding/json does, which is what slog's JSON handler
// uses for floats.
func (e *lineEncoder) Float(key string, f float64) {
	e.key(key)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// slog writes the error where the value would be; durations are
		// never either.
		e.b = append(e.b, `"!ERROR:unsupported value"`...)
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(e.b); n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
}

func (e *lineEncoder) End() []byte {
	e.b = append(e.b, "}\n"...)
	return e.b
}

func (e *lineEncoder) Free() {
	if cap(e.b) <= 16<<10 {
		lineEncoders.Put(e)
	}
}

// appendJSONString appends s escaped as slog's JSON handler escapes
// strings: quotes, backslashes and control characters, invalid UTF-8 as
// U+FFFD, and U+2028 and U+2029.
func appendJSONString(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

const hexDigits = "0123456789abcdef"

// bufferedLog collects lines and writes them to out when accessBufferSize
// is reached or accessFlushDelay after the first line waiting, in the
// order they came.
type bufferedLog struct {
	out   io.Writer
	delay time.Duration

	mu    sync.Mutex
	buf   []byte
	spare []byte
	// armed is set while the timer is to write what waits.
	armed bool
	timer *time.Timer
	// writing serializes writes to out, so that lines keep their order.
	writing sync.Mutex
}

func NewBufferedLog(out io.Writer, delay time.Duration) *bufferedLog {
	l := &bufferedLog{out: out, delay: delay}
	l.timer = time.AfterFunc(time.Hour, l.Flush)
	l.timer.Stop()
	return l
}

func (l *bufferedLog) Write(line []byte) {
	l.mu.Lock()
	if l.buf == nil {
		l.buf = make([]byte, 0, accessBufferSize)
	}
	l.buf = append(l.buf, line...)
	if len(l.buf) >= accessBufferSize || l.delay <= 0 {
		l.flushLocked()
		return
	}
	if !l.armed {
		l.armed = true
		l.timer.Reset(l.delay)
	}
	l.mu.Unlock()
}

// flush writes what waits.
func (l *bufferedLog) Flush() {
	l.mu.Lock()
	l.flushLocked()
}

// flushLocked writes what waits; it is called with mu held and releases
// it, so that lines keep coming while the buffer is written.
func (l *bufferedLog) flushLocked() {
	if l.armed {
		l.armed = false
		l.timer.Stop()
	}
	b := l.buf
	if len(b) == 0 {
		l.mu.Unlock()
		return
	}
	l.buf, l.spare = l.spare[:0], nil
	l.writing.Lock()
	l.mu.Unlock()
	_, _ = l.out.Write(b)
	l.writing.Unlock()
	if cap(b) <= 2*accessBufferSize {
		l.mu.Lock()
		if l.spare == nil {
			l.spare = b[:0]
		}
		l.mu.Unlock()
	}
}

// accessFile is the access log file. Reopen opens the path again, so that
// after logrotate renamed the file, lines go to a new file of the
// configured name.
type AccessFile struct {
	Path string
	mu   sync.RWMutex
	f    *os.File
}

func OpenAccessFile(path string) (*AccessFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	return &AccessFile{Path: path, f: f}, nil
}

func (a *AccessFile) Write(b []byte) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.f.Write(b)
}

// Reopen switches to a newly opened file of the same name; on failure the
// old file stays in use.
func (a *AccessFile) Reopen() error {
	f, err := os.OpenFile(a.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.f
	a.f = f
	a.mu.Unlock()
	return old.Close()
}

func (a *AccessFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

package forward

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/internal/upstream"
	"golang.org/x/net/http/httpguts"
)

// requestBody is a client's request body on its way to the upstream. It
// gives each read timeouts.request_body (the time the client may leave
// the upload idle, not its whole length), and it keeps the first read
// error, so that a body the client broke is answered as the client's
// fault and never counted against the upstream target.
//
// Once the response has started, what is written to the client counts
// as activity too (responded), as Envoy's stream idle timeout does: a
// bidirectional stream (gRPC) whose client only listens while the
// upstream streams is not cut, one quiet both ways still is.
//
// Until the response starts, the body must also keep an average of
// minRate bytes a second (timeouts.request_body_min_rate) over the time
// gmgate waited for it, past a first idle of grace, as Apache's
// mod_reqtimeout MinRate asks: a body that trickles a byte every few
// seconds, each within idle, would otherwise hold its request and the
// upstream's for ever. Time the upstream takes to accept the data does
// not count, nor, once the response has started, the rate: a stream
// answered is bounded by its activity both ways alone.
type RequestBody struct {
	io.ReadCloser
	Ctl  *http.ResponseController
	idle time.Duration
	// minRate is the average the body must keep, in bytes a second (0:
	// none); waited is the time Reads waited for the client, got the
	// bytes they brought (both under reading); answered is set once the
	// response has started.
	MinRate  int64
	waited   time.Duration
	got      int64
	answered atomic.Bool
	// http1 is set for a request over HTTP/1.
	Http1 bool

	// reading is held during each Read (made by the transport's
	// goroutine), so that failure can wait for one in flight.
	reading sync.Mutex
	// started is set by the first Read, done once a Read has returned
	// an error (io.EOF included); forwarded once the request is handed
	// to the upstream's transport, which reads the body from then on.
	started, done, forwarded atomic.Bool
	mu                       sync.Mutex
	err                      error

	// deadlineMu orders the read deadlines set by Read and by the
	// response's writes; readUntil is the one of the Read in flight
	// (zero when none waits).
	deadlineMu sync.Mutex
	readUntil  time.Time

	// trailerIn is the client's trailer, trailerOut the upstream's (see
	// forwardTrailer), nil when none is forwarded.
	trailerIn, trailerOut http.Header
}

func NewRequestBody(body io.ReadCloser, w http.ResponseWriter, idle time.Duration) *RequestBody {
	return &RequestBody{ReadCloser: body, Ctl: http.NewResponseController(w), idle: idle}
}

func (b *RequestBody) Read(p []byte) (int, error) {
	b.reading.Lock()
	defer b.reading.Unlock()
	b.started.Store(true)
	now := time.Now()
	if b.idle > 0 {
		// The deadline is set when gmgate is ready for more, so a slow
		// upstream does not count against the client.
		until := now.Add(b.idle)
		if r := b.rateDeadline(now); !r.IsZero() && r.Before(until) {
			until = r
		}
		b.setReadDeadline(until)
	}
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(now)
	b.got += int64(n)
	if b.idle > 0 {
		b.deadlineMu.Lock()
		b.readUntil = time.Time{}
		b.deadlineMu.Unlock()
	}
	switch {
	case err == io.EOF:
		b.done.Store(true)
		// The server has read the client's trailer before the body's
		// end; the transport sends the upstream's after it.
		for k := range b.trailerOut {
			b.trailerOut[k] = b.trailerIn[k]
		}
		if b.idle > 0 {
			_ = b.Ctl.SetReadDeadline(time.Time{})
		}
	case err != nil:
		b.done.Store(true)
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// forwardTrailer returns the trailer the upstream gets after the body,
// given the client's, in, which holds the names the client declared in
// its Trailer header: those that may be sent in a trailer (RFC 9110
// §6.5.1: not Host, Content-Length, Authorization, a hop-by-hop header…)
// and that name no header gmgate sets (X-Forwarded-For, a session
// header). Their values are filled in when the body ends (Read), once
// the client's trailer has come. net/http's HTTP/1.1 server adds every
// field of that trailer to in, declared or not, whatever its name: in
// itself would take them all to the upstream.
func (b *RequestBody) ForwardTrailer(in http.Header, spoofable []string) http.Header {
	if len(in) == 0 {
		return nil
	}
	out := make(http.Header, len(in))
	for k := range in {
		if httpguts.ValidTrailerHeader(k) && !slices.Contains(HopByHop, http.CanonicalHeaderKey(k)) {
			out[k] = nil
		}
	}
	RemoveSpoofable(out, spoofable)
	if len(out) == 0 {
		return nil
	}
	b.trailerIn, b.trailerOut = in, out
	return out
}

// maxRateCredit bounds the waiting the bytes of a body earn, so that the
// sum cannot overflow.
const maxRateCredit = 24 * time.Hour

// rateDeadline is when a Read starting at now must have brought data for
// the body to keep minRate on average over the time gmgate waited for it,
// past a first idle of grace; zero when the rate does not apply (none is
// set, or the response has started).
func (b *RequestBody) rateDeadline(now time.Time) time.Time {
	if b.MinRate <= 0 || b.answered.Load() {
		return time.Time{}
	}
	credit := maxRateCredit
	if secs := b.got / b.MinRate; secs < int64(maxRateCredit/time.Second) {
		credit = time.Duration(b.got) * time.Second / time.Duration(b.MinRate)
	}
	return now.Add(b.idle + credit - b.waited)
}

func (b *RequestBody) setReadDeadline(t time.Time) {
	b.deadlineMu.Lock()
	defer b.deadlineMu.Unlock()
	b.readUntil = t
	_ = b.Ctl.SetReadDeadline(t)
}

// streaming reports whether the body is being forwarded and has not
// ended: the response then starts while the client may still send. A
// body the transport has yet to start reading when the upstream answers
// (it answered at once, or the transport's goroutine is slow to be
// scheduled) is being forwarded too: reading it is the transport's, not
// net/http's, which would otherwise read and drop it before it sends the
// response's header.
func (b *RequestBody) Streaming() bool {
	return (b.started.Load() || b.forwarded.Load()) && !b.done.Load()
}

// Forwarding notes that the request is handed to the upstream's
// transport, which reads the body.
func (b *RequestBody) Forwarding() { b.forwarded.Store(true) }

// responded pushes back the deadline of a read waiting for the client
// when the response has written to it: the body is idle only while
// nothing moves either way. The deadline moves by an eighth of the
// idle time at least, so a stream of small writes does not reset it for
// each; a stream quiet both ways is cut between idle and an eighth more
// after its last byte.
func (b *RequestBody) Responded() {
	b.answered.Store(true)
	if b.idle <= 0 {
		return
	}
	b.deadlineMu.Lock()
	defer b.deadlineMu.Unlock()
	if b.readUntil.IsZero() {
		return
	}
	now := time.Now()
	if b.readUntil.Sub(now) >= b.idle {
		return
	}
	b.readUntil = now.Add(b.idle + b.idle/8)
	_ = b.Ctl.SetReadDeadline(b.readUntil)
}

// boundUnread gives an HTTP/1 body that nobody read (its request was
// answered without being forwarded, or its upstream failed before taking
// it) the idle time a forwarded body's reads have: before net/http
// writes the answer it reads what is left of the body (up to 256 KiB, so
// that the connection can serve another request), and without a
// deadline a client that stopped sending would hold its connection,
// unanswered, for ever. Past the deadline the answer goes out and the
// connection is closed. (HTTP/2 resets the stream of a body left unread.)
func (b *RequestBody) BoundUnread() {
	if b.idle > 0 && !b.started.Load() {
		_ = b.Ctl.SetReadDeadline(time.Now().Add(b.idle))
	}
}

// failure returns the error reading the body met, as a *clientBodyError,
// or nil. With settle it first waits for a read in flight to return: when
// the client's connection fails, net/http cancels the request before the
// read that saw the failure has returned, and the transport may give up
// first.
func (b *RequestBody) Failure(settle bool) error {
	if settle {
		b.reading.Lock()
		defer b.reading.Unlock()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		return nil
	}
	return &ClientBodyError{Err: b.err}
}

// RequestBodyKey finds a request's *RequestBody in its context: the
// key under which upstream looks for a body at fault.
type RequestBodyKey = upstream.BodyKey

// clientBodyError is a failure to read a client's request body: the
// client's doing, not the upstream's.
type ClientBodyError struct{ Err error }

func (e *ClientBodyError) Error() string { return "reading the request body: " + e.Err.Error() }
func (e *ClientBodyError) Unwrap() error { return e.Err }

// status is what the failure is answered with: 408 when the client let the
// body idle past timeouts.request_body, 499 (logged, never sent: nobody
// is there to read it) when the client went away, 400 for a body that is
// not valid HTTP (a malformed chunk, say).
func (e *ClientBodyError) Status() int {
	var ne net.Error
	switch {
	case errors.Is(e.Err, os.ErrDeadlineExceeded), errors.As(e.Err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout
	case errors.Is(e.Err, io.ErrUnexpectedEOF), errors.Is(e.Err, io.EOF), errors.Is(e.Err, net.ErrClosed),
		errors.Is(e.Err, syscall.ECONNRESET), errors.Is(e.Err, syscall.EPIPE):
		return StatusClientClosed
	}
	return http.StatusBadRequest
}

// statusClientClosed is logged for requests whose client went away
// before it could be answered (nginx's 499); it is never sent.
const StatusClientClosed = 499

// framingSniffer watches the request headers read on a connection for a
// header block with both Content-Length and Transfer-Encoding. net/http
// follows Transfer-Encoding and drops Content-Length, as RFC 9112 §6.1
// says, without telling the handler; the same section says the connection
// must then be closed after the response, since a proxy in front may
// have framed the request by Content-Length and sent another request
// hidden in the body.
//
// It sees the bytes, not the messages, so a body that holds such a header
// block also closes the connection after its request: harmless, a new
// connection is all it costs.
type FramingSniffer struct {
	line         [len("transfer-encoding:")]byte // start of the current line
	n            int
	sawCL, sawTE bool
}

// scan reads b and reports whether a header block with both headers ended
// in it.
func (s *FramingSniffer) Scan(b []byte) bool {
	ambiguous := false
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if s.n < len(s.line) {
			s.n += copy(s.line[s.n:], part)
		}
		if i < 0 {
			break
		}
		if s.endLine() {
			ambiguous = true
		}
		b = b[i+1:]
	}
	return ambiguous
}

// endLine takes the line held and reports whether it ended a header block
// that had both headers.
func (s *FramingSniffer) endLine() bool {
	line := s.line[:s.n]
	s.n = 0
	if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
		both := s.sawCL && s.sawTE
		s.sawCL, s.sawTE = false, false
		return both
	}
	switch {
	case hasPrefixFold(line, "content-length:"):
		s.sawCL = true
	case hasPrefixFold(line, "transfer-encoding:"):
		s.sawTE = true
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

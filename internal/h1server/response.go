package h1server

import (
	"bufio"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is the http.ResponseWriter of one request. It answers as
// net/http's server answers the same handler calls, byte for byte but
// for the Date (TestResponseMatchesNetHTTP): the header as it stood at
// WriteHeader; informational responses at once; a Content-Length for a
// body that was whole by the time the handler returned and fits the
// 2 KiB body buffer, chunks otherwise; a Content-Type sniffed from the
// first bytes when none was set; trailers declared in Trailer or by
// http.TrailerPrefix; nothing of the body for HEAD, 1xx, 204 and 304;
// Connection: close when the connection is not kept.
type response struct {
	c   *conn
	req *http.Request
	// handlerHeader is what Header returns.
	handlerHeader http.Header
	calledHeader  bool
	// What startHeader found in the header at WriteHeader, for
	// writeHeader.
	hasTrailers, hasTE, hasCLField, hasType, encoded, hasDate bool
	// lengthLater: a Content-Length if the body is whole when the
	// handler returns; chunksLater: chunks otherwise; closeField: a
	// Connection: close is added.
	lengthLater, chunksLater, closeField bool
	// wroteHeader: the handler's final status is set (status);
	// headerOut: its header is in the connection's buffer.
	wroteHeader, headerOut bool
	status                 int
	// contentLength is the declared length (-1: none), written what the
	// handler wrote.
	contentLength, written int64
	chunking               bool
	// closeAfter ends the connection after this response.
	closeAfter bool
	// done is set when the handler has returned.
	done     bool
	hijacked bool
	trailers []string
	// body holds the first 2 KiB of the body until the handler returns
	// or writes more, so that a short body gets a Content-Length.
	body *bufio.Writer
	// bodyOut is what body flushes into: the chunk framing.
	bodyOut chunkWriter
}

var bodyBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bodyBufferSize) }}

// bodyBufferSize is net/http's bufferBeforeChunkingSize.
const bodyBufferSize = 2048

func (w *response) Header() http.Header {
	w.calledHeader = true
	return w.handlerHeader
}

func (w *response) WriteHeader(code int) {
	if w.hijacked {
		w.c.srv.logf("http: response.WriteHeader on hijacked connection")
		return
	}
	if w.wroteHeader {
		w.c.srv.logf("http: superfluous response.WriteHeader call")
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		bw := w.c.bufw
		writeStatusLine(bw, code)
		_ = w.handlerHeader.WriteSubset(bw, noBodyExcluded)
		_, _ = bw.Write(crlf)
		w.c.flushOut()
		return
	}
	w.wroteHeader = true
	w.status = code
	invalidLength := false
	if cl := headerGet(w.handlerHeader, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logf("http: invalid Content-Length of %q", cl)
			invalidLength = true
		}
	}
	w.startHeader()
	if invalidLength {
		// Out of the header after it was taken, as net/http does.
		w.handlerHeader.Del("Content-Length")
	}
}

var noBodyExcluded = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}

func (w *response) Write(p []byte) (int, error) {
	if err := w.beforeWrite(len(p)); err != nil || len(p) == 0 {
		return 0, err
	}
	return w.body.Write(p)
}

func (w *response) WriteString(s string) (int, error) {
	if err := w.beforeWrite(len(s)); err != nil || len(s) == 0 {
		return 0, err
	}
	return w.body.WriteString(s)
}

func (w *response) beforeWrite(n int) error {
	if w.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if n == 0 {
		return nil
	}
	if !bodyAllowedForStatus(w.status) {
		return http.ErrBodyNotAllowed
	}
	w.written += int64(n)
	if w.contentLength != -1 && w.written > w.contentLength {
		return http.ErrContentLength
	}
	return nil
}

func (w *response) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController's Flush calls.
func (w *response) FlushError() error {
	if w.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	err := w.body.Flush()
	w.writeHeader(nil)
	if e := w.c.flushOut(); err == nil {
		err = e
	}
	return err
}

// Hijack hands the connection over, as net/http's does: the header
// written so far goes out first.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.done {
		panic("net/http: Hijack called after ServeHTTP finished")
	}
	if w.hijacked {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		// As net/http: the header goes, the buffered body does not.
		w.writeHeader(nil)
		_ = w.c.flushOut()
	}
	w.hijacked = true
	return w.c.hijack()
}

// SetReadDeadline and SetWriteDeadline serve http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error  { return w.c.rwc.SetReadDeadline(t) }
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// EnableFullDuplex has nothing to do: a request served here has no body.
func (w *response) EnableFullDuplex() error { return nil }

// finish completes the response once the handler has returned.
func (w *response) finish() {
	w.done = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.body.Flush()
	w.writeHeader(nil)
	if w.chunking {
		bw := w.c.bufw
		_, _ = bw.WriteString("0\r\n")
		if t := w.finalTrailers(); t != nil {
			_ = t.Write(bw)
		}
		_, _ = bw.WriteString("\r\n")
	}
}

// reusable reports whether the connection may carry another request.
func (w *response) reusable() bool {
	if w.closeAfter || w.c.werr != nil {
		return false
	}
	// A body shorter than its Content-Length leaves the client waiting
	// for the rest.
	return w.req.Method == http.MethodHead || w.contentLength == -1 || !bodyAllowedForStatus(w.status) || w.contentLength == w.written
}

func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.handlerHeader {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if t == nil {
				t = http.Header{}
			}
			t[name] = vv
		}
	}
	for _, k := range w.trailers {
		if t == nil {
			t = http.Header{}
		}
		for _, v := range w.handlerHeader[k] {
			t.Add(k, v)
		}
	}
	return t
}

// chunkWriter takes the body from the response's body buffer: the first
// bytes decide the header, and then each write is a chunk when the body
// is chunked.
type chunkWriter struct{ w *response }

func (cw chunkWriter) Write(p []byte) (int, error) {
	w := cw.w
	w.writeHeader(p)
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	bw := w.c.bufw
	if w.chunking {
		var size [16]byte
		_, _ = bw.Write(strconv.AppendInt(size[:0], int64(len(p)), 16))
		_, _ = bw.Write(crlf)
	}
	n, err := bw.Write(p)
	if w.chunking && err == nil {
		_, err = bw.Write(crlf)
	}
	if err != nil {
		w.c.noteWriteError(err)
	}
	return n, err
}

// startHeader puts the status line and the handler's header fields in
// the connection's buffer when the final status is set: the header as it
// stands then is the one sent, as net/http sends it (its copy of the
// header at WriteHeader), without a copy. What depends on the body (a
// Content-Length or chunks, a sniffed Content-Type) follows in
// writeHeader, with the fields the server adds, in net/http's order.
// Every field net/http would leave out is known now: those the status
// forbids, a Content-Length beside a Transfer-Encoding, a
// Transfer-Encoding that framing replaces, a Connection that a closing
// connection replaces, and the http.TrailerPrefix ones.
func (w *response) startHeader() {
	h := w.handlerHeader
	code := w.status
	isHEAD := w.req.Method == http.MethodHead
	var exclude map[string]bool
	del := func(key string) {
		if _, ok := h[key]; !ok {
			return
		}
		if exclude == nil {
			exclude = map[string]bool{}
		}
		exclude[key] = true
	}
	if w.calledHeader {
		for k := range h {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				if exclude == nil {
					exclude = map[string]bool{}
				}
				exclude[k] = true
				w.hasTrailers = true
			}
		}
		for _, v := range h["Trailer"] {
			w.hasTrailers = true
			for _, f := range strings.Split(v, ",") {
				if f = textproto.TrimString(f); f != "" {
					w.declareTrailer(f)
				}
			}
		}
	}
	te := headerGet(h, "Transfer-Encoding")
	w.hasTE = te != ""
	w.hasCLField = headerHas(h, "Content-Length")
	_, w.hasType = h["Content-Type"]
	w.encoded = headerGet(h, "Content-Encoding") != ""
	w.hasDate = headerHas(h, "Date")
	connection := headerGet(h, "Connection")
	shutdown := w.c.srv.shuttingDown()
	if connection == "close" || shutdown {
		w.closeAfter = true
	}
	if !bodyAllowedForStatus(code) {
		keys := noBodySuppressed
		if code == http.StatusNotModified {
			keys = notModifiedSuppressed
		}
		for _, k := range keys {
			del(k)
		}
	}
	if w.contentLength != -1 && w.hasTE && te != "identity" {
		w.c.srv.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		del("Content-Length")
		w.contentLength = -1
		w.hasCLField = false
	}
	// A body whole when the handler returns may get a Content-Length;
	// whether another is chunked is known now when the handler set a
	// Content-Length or a Transfer-Encoding, and otherwise decided by
	// writeHeader.
	w.lengthLater = !w.hasTrailers && !w.hasTE && bodyAllowedForStatus(code) && !w.hasCLField
	switch {
	case isHEAD || !bodyAllowedForStatus(code) || code == http.StatusNoContent:
		del("Transfer-Encoding")
	case w.contentLength != -1:
		del("Transfer-Encoding")
	case w.hasTE && te == "identity":
		w.closeAfter = true
		del("Transfer-Encoding")
	case w.hasTE:
		w.chunking = true
		if te == "chunked" {
			del("Transfer-Encoding")
		}
	case w.hasCLField:
		// A Content-Length without a valid value: chunks, without it.
		w.chunking = true
		del("Content-Length")
	default:
		w.chunksLater = true
	}
	if w.closeAfter && (shutdown || !hasToken(connection, "close")) && !isProtocolSwitch(code, h) {
		del("Connection")
		w.closeField = true
	}
	bw := w.c.bufw
	writeStatusLine(bw, code)
	if w.calledHeader {
		_ = h.WriteSubset(bw, exclude)
	}
}

// writeHeader ends the header in the connection's buffer, once; p is the
// body's first bytes (nil when there are none yet).
func (w *response) writeHeader(p []byte) {
	if w.headerOut {
		return
	}
	w.headerOut = true
	var extra extraHeader
	code := w.status
	if w.lengthLater && w.done && (w.req.Method != http.MethodHead || len(p) > 0) {
		w.contentLength = int64(len(p))
		extra.contentLength = strconv.AppendInt(w.c.lenBuf[:0], int64(len(p)), 10)
	} else if w.chunksLater {
		w.chunking = true
	}
	if bodyAllowedForStatus(code) && !w.encoded && !w.hasType && !w.hasTE && len(p) > 0 {
		extra.contentType = http.DetectContentType(p)
	}
	if !w.hasDate {
		extra.date = w.c.srv.date.now()
	}
	if w.closeField {
		extra.connection = "close"
	}
	if w.chunking {
		extra.transferEncoding = "chunked"
	}
	bw := w.c.bufw
	extra.write(bw)
	_, _ = bw.Write(crlf)
}

func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if !httpguts.ValidTrailerHeader(k) {
		return
	}
	w.trailers = append(w.trailers, k)
}

var (
	noBodySuppressed      = []string{"Content-Length", "Transfer-Encoding"}
	notModifiedSuppressed = []string{"Content-Type", "Content-Length", "Transfer-Encoding"}
)

// extraHeader are the fields the server adds, written after the
// handler's in net/http's order.
type extraHeader struct {
	date, contentLength                       []byte
	contentType, connection, transferEncoding string
}

func (h *extraHeader) write(bw *bufio.Writer) {
	if h.date != nil {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(h.date)
		_, _ = bw.Write(crlf)
	}
	if h.contentLength != nil {
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(h.contentLength)
		_, _ = bw.Write(crlf)
	}
	for _, f := range [...]struct{ k, v string }{{"Content-Type", h.contentType}, {"Connection", h.connection}, {"Transfer-Encoding", h.transferEncoding}} {
		if f.v != "" {
			_, _ = bw.WriteString(f.k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(f.v)
			_, _ = bw.Write(crlf)
		}
	}
}

func writeStatusLine(bw *bufio.Writer, code int) {
	var num [8]byte
	_, _ = bw.WriteString("HTTP/1.1 ")
	if text := http.StatusText(code); text != "" {
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
		_ = bw.WriteByte(' ')
		_, _ = bw.WriteString(text)
		_, _ = bw.Write(crlf)
		return
	}
	// Three digits, as net/http writes an unknown status.
	s := strconv.Itoa(code)
	for len(s) < 3 {
		s = "0" + s
	}
	_, _ = bw.WriteString(s + " status code " + strconv.Itoa(code) + "\r\n")
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199, status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// headerGet and headerHas read a canonical key as net/http's do: the
// first value, and whether the key is there at all.
func headerGet(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func headerHas(h http.Header, key string) bool {
	_, ok := h[key]
	return ok
}

// hasToken reports whether token is in v, in any case, between the
// start or end, spaces and commas.
func hasToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for i := 0; i+len(token) <= len(v); i++ {
		if !strings.EqualFold(v[i:i+len(token)], token) {
			continue
		}
		if (i == 0 || isTokenBoundary(v[i-1])) && (i+len(token) == len(v) || isTokenBoundary(v[i+len(token)])) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

func isProtocolSwitch(code int, h http.Header) bool {
	return code == http.StatusSwitchingProtocols && len(h["Upgrade"]) > 0 && httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade")
}

// dateCache formats the Date field once a second.
type dateCache struct {
	mu   sync.Mutex
	sec  int64
	text []byte
}

func (d *dateCache) now() []byte {
	t := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := t.Unix(); s != d.sec || d.text == nil {
		d.sec = s
		d.text = t.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)
	}
	return d.text
}

package proxy

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2ClientThatStopsReadingIsCut: an HTTP/2 client that stops
// taking a response (it grants no flow-control window, and answers PINGs
// so that its connection looks alive) holds its request, and the
// upstream's, only for timeouts.idle, as an HTTP/1 client that stops
// reading does: otherwise a few connections of 128 such streams each
// hold every upstream connection for ever.
func TestHTTP2ClientThatStopsReadingIsCut(t *testing.T) {
	p := getPKI(t)
	const idle = 300 * time.Millisecond
	gone := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range 1024 { // 32 MiB, more than any buffer on the way
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		gone <- struct{}{}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)

	c, err := tls.Dial("tcp", s.Addr("edge").String(), &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	// No window for response bodies, now or later.
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/big"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// Read frames (answering PINGs and acknowledging SETTINGS) until
	// the upstream's request ends.
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			}
		}
	}()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the upstream's response was still held 10 s after the HTTP/2 client stopped taking it (idle %v)", idle)
	}
}

// TestHTTP2QuietStreamNotCut: the bound of TestHTTP2ClientThatStopsReadingIsCut
// is on writes that wait for the client, not on a response that is quiet
// for longer than timeouts.idle (server-sent events, a long poll).
func TestHTTP2QuietStreamNotCut(t *testing.T) {
	p := getPKI(t)
	const idle = 300 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(3 * idle)
		}
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	cfg.Timeouts.Idle = config.Duration(idle)
	s := startServer(t, cfg, nil)
	resp, err := h2TLSClient(t, p).Get("https://" + s.Addr("edge").String() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || err != nil || string(body) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Fatalf("HTTP/%d, %q, %v", resp.ProtoMajor, body, err)
	}
}

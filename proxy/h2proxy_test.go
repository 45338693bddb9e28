package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"testing"
)

// TestInformationalResponsesLoseHopByHop: a 1xx response (103 Early
// Hints) is passed to the client without the upstream's hop-by-hop
// headers, as the final response is. In HTTP/2 they make the response
// malformed (RFC 9113 §8.2.2): browsers and curl fail the request.
func TestInformationalResponsesLoseHopByHop(t *testing.T) {
	p := getPKI(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Link", "</app.css>; rel=preload")
		h.Set("Connection", "keep-alive, X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Connection", "keep-alive")
		h.Set("Upgrade", "h2c")
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		_, _ = w.Write([]byte("ok"))
	}))
	defer up.Close()
	s := startServer(t, testConfig(p, up.URL), nil)
	for name, client := range map[string]*http.Client{"http1": tlsClient(t, p), "http2": h2TLSClient(t, p)} {
		var hints []textproto.MIMEHeader
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, h)
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", gatewayURL(s, "/hints"), nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		readAll(t, resp)
		if len(hints) != 1 || hints[0].Get("Link") == "" {
			t.Fatalf("%s: 1xx responses %v", name, hints)
		}
		for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade"} {
			if v, ok := hints[0][k]; ok {
				t.Errorf("%s: the 103 response passed on %s: %q", name, k, v)
			}
		}
	}
}

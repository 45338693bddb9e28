package forward

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGRPCRequest(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc":              true,
		"application/grpc+proto":        true,
		"application/grpc;charset=utf8": true,
		"application/grpc-web":          false,
		"application/grpc-web+proto":    false,
		"application/json":              false,
		"":                              false,
	} {
		r := httptest.NewRequest(http.MethodPost, "/pkg.Svc/Method", nil)
		r.Header.Set("Content-Type", ct)
		if got := GRPCRequest(r); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}

// A gRPC error is a trailers-only answer: 200, the status and the
// message percent-encoded in the header, no body.
func TestGRPCError(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("X-Stale", "1")
	GRPCError(w, grpcCode(http.StatusGatewayTimeout), "100% late\n")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/grpc" || w.Header().Get("X-Stale") != "" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	if s, m := w.Header().Get("Grpc-Status"), w.Header().Get("Grpc-Message"); s != "4" || m != "100%25 late%0A" || w.Body.Len() != 0 {
		t.Fatalf("grpc-status %q, grpc-message %q, body %q", s, m, w.Body)
	}
	if grpcCode(http.StatusServiceUnavailable) != 14 || grpcCode(http.StatusBadGateway) != 14 {
		t.Fatal("503 and 502 are not UNAVAILABLE")
	}
}

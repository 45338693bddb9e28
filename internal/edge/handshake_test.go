package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/forward"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/tlcp"
)

func TestHandshakeResultLabels(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&tlcp.AlertError{Alert: tlcp.AlertHandshakeFailure}, "alert_sent_handshake_failure"},
		{&tlcp.AlertError{Alert: tlcp.AlertBadCertificate, Remote: true}, "alert_received_bad_certificate"},
		{fmt.Errorf("wrapped: %w", &tlcp.AlertError{Alert: tlcp.AlertDecodeError}), "alert_sent_error_decoding_message"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: unknown certificate authority")}, "alert_received_unknown_certificate_authority"},
		{fmt.Errorf("%w (x)", ErrNotHandshake), "not_tlcp_or_tls"},
		{context.DeadlineExceeded, "timeout"},
		{os.ErrDeadlineExceeded, "timeout"},
		{io.EOF, "client_closed"},
		{io.ErrUnexpectedEOF, "client_closed"},
		{errors.New("tls: client offered only unsupported versions"), "error"},
	}
	for _, c := range cases {
		if got := HandshakeResult(c.err); got != c.want {
			t.Errorf("handshakeResult(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// An answered TLS-ALPN-01 challenge is no failure: it is logged at debug
// as what it was, never among the rate-limited "handshake failed" lines.
func TestHandshakeFailedACMEChallenge(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	failLog := observe.NewRateLimitedLog(log, slog.LevelInfo, "handshake failures not logged")
	info := &forward.ConnInfo{Protocol: "tls", SNI: "www.example.cn"}
	client := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}
	HandshakeFailed(log, failLog, observe.NewMetrics(), "edge", client, info, errACMEChallenge, time.Millisecond)

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("want one JSON line, got %q: %v", buf.String(), err)
	}
	if line["msg"] != "ACME TLS-ALPN challenge answered" || line["level"] != "DEBUG" {
		t.Errorf("logged %v %q, want DEBUG \"ACME TLS-ALPN challenge answered\"", line["level"], line["msg"])
	}
	if line["sni"] != "www.example.cn" || line["listener"] != "edge" {
		t.Errorf("line lacks the name or the listener: %v", line)
	}

	// Any other failure is still a "handshake failed" line at info.
	buf.Reset()
	HandshakeFailed(log, failLog, observe.NewMetrics(), "edge", client, info, &tlcp.AlertError{Alert: tlcp.AlertHandshakeFailure}, time.Millisecond)
	if !strings.Contains(buf.String(), `"msg":"handshake failed"`) || !strings.Contains(buf.String(), `"level":"INFO"`) {
		t.Errorf("a failed handshake logged %q", buf.String())
	}
}

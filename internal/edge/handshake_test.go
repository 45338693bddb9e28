package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

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

package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/gmgate/gmgate/tlcp"
)

// Error kinds are short and of low cardinality so that a run's errors group
// into a few lines.
var numbers = regexp.MustCompile(`[0-9]+([.:][0-9]+)*`)

// errorKind names what went wrong, by stage ("connect", "handshake",
// "request") and cause.
func errorKind(stage string, err error) string {
	return stage + ": " + errorCause(err)
}

func errorCause(err error) string {
	var tlcpAlert *tlcp.AlertError
	var tlsAlert tls.AlertError
	var verify *tls.CertificateVerificationError
	var netErr net.Error
	var netOp *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &tlcpAlert):
		if tlcpAlert.Remote {
			return "alert from server: " + tlcpAlert.Alert.String()
		}
		return "alert sent: " + tlcpAlert.Alert.String()
	case errors.As(err, &tlsAlert):
		return "alert from server: " + strings.TrimPrefix(tlsAlert.Error(), "tls: ")
	case errors.As(err, &netOp) && netOp.Op == "remote error" && netOp.Err != nil:
		// crypto/tls reports an alert received over TCP this way.
		return "alert from server: " + strings.TrimPrefix(netOp.Err.Error(), "tls: ")
	case errors.As(err, &verify):
		return "certificate verification failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no free local port (EADDRNOTAVAIL)"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too many open files"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed by server"
	case errors.Is(err, net.ErrClosed):
		return "connection closed"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "name resolution failed"
	}
	return "other: " + numbers.ReplaceAllString(fmt.Sprint(err), "N")
}

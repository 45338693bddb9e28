package observe

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// sentAlertError is a handshake failure that crypto/tls ended with an
// alert it does not report in its error.
type SentAlertError struct {
	Alert string
	Err   error
}

func (e *SentAlertError) Error() string { return e.Err.Error() }
func (e *SentAlertError) Unwrap() error { return e.Err }

func TLSVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "tls1.3"
	case tls.VersionTLS12:
		return "tls1.2"
	}
	return "tls"
}

// handshakeAlert returns the alert a failed handshake ended with, when
// it is known, and whether it was sent or received.
func HandshakeAlert(err error) (dir, alert string, ok bool) {
	var se *SentAlertError
	if errors.As(err, &se) {
		return "sent", se.Alert, true
	}
	var ae *tlcp.AlertError
	if errors.As(err, &ae) {
		dir = "sent"
		if ae.Remote {
			dir = "received"
		}
		return dir, strings.ReplaceAll(ae.Alert.String(), " ", "_"), true
	}
	var ae13 *tls13.AlertError
	if errors.As(err, &ae13) {
		dir = "sent"
		if ae13.Remote {
			dir = "received"
		}
		return dir, strings.ReplaceAll(ae13.Alert.String(), " ", "_"), true
	}
	// crypto/tls reports an alert from the peer as an OpError "remote
	// error" around the alert; the alert names are a small fixed set.
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" && oe.Err != nil {
		return "received", strings.ReplaceAll(strings.TrimPrefix(oe.Err.Error(), "tls: "), " ", "_"), true
	}
	return "", "", false
}

package tls13

import (
	"errors"
	"strconv"
)

// Alert is a TLS 1.3 alert description (RFC 8446 §6).
type Alert uint8

const (
	alertLevelWarning = 1
	alertLevelError   = 2
)

// Alert descriptions (RFC 8446 §6).
const (
	AlertCloseNotify                  Alert = 0
	AlertUnexpectedMessage            Alert = 10
	AlertBadRecordMAC                 Alert = 20
	AlertRecordOverflow               Alert = 22
	AlertHandshakeFailure             Alert = 40
	AlertBadCertificate               Alert = 42
	AlertUnsupportedCertificate       Alert = 43
	AlertCertificateRevoked           Alert = 44
	AlertCertificateExpired           Alert = 45
	AlertCertificateUnknown           Alert = 46
	AlertIllegalParameter             Alert = 47
	AlertUnknownCA                    Alert = 48
	AlertAccessDenied                 Alert = 49
	AlertDecodeError                  Alert = 50
	AlertDecryptError                 Alert = 51
	AlertProtocolVersion              Alert = 70
	AlertInsufficientSecurity         Alert = 71
	AlertInternalError                Alert = 80
	AlertInappropriateFallback        Alert = 86
	AlertUserCanceled                 Alert = 90
	AlertMissingExtension             Alert = 109
	AlertUnsupportedExtension         Alert = 110
	AlertUnrecognizedName             Alert = 112
	AlertBadCertificateStatusResponse Alert = 113
	AlertUnknownPSKIdentity           Alert = 115
	AlertCertificateRequired          Alert = 116
	AlertNoApplicationProtocol        Alert = 120
)

var alertNames = map[Alert]string{
	AlertCloseNotify:                  "close notify",
	AlertUnexpectedMessage:            "unexpected message",
	AlertBadRecordMAC:                 "bad record MAC",
	AlertRecordOverflow:               "record overflow",
	AlertHandshakeFailure:             "handshake failure",
	AlertBadCertificate:               "bad certificate",
	AlertUnsupportedCertificate:       "unsupported certificate",
	AlertCertificateRevoked:           "revoked certificate",
	AlertCertificateExpired:           "expired certificate",
	AlertCertificateUnknown:           "unknown certificate",
	AlertIllegalParameter:             "illegal parameter",
	AlertUnknownCA:                    "unknown certificate authority",
	AlertAccessDenied:                 "access denied",
	AlertDecodeError:                  "error decoding message",
	AlertDecryptError:                 "error decrypting message",
	AlertProtocolVersion:              "protocol version not supported",
	AlertInsufficientSecurity:         "insufficient security level",
	AlertInternalError:                "internal error",
	AlertInappropriateFallback:        "inappropriate fallback",
	AlertUserCanceled:                 "user canceled",
	AlertMissingExtension:             "missing extension",
	AlertUnsupportedExtension:         "unsupported extension",
	AlertUnrecognizedName:             "unrecognized name",
	AlertBadCertificateStatusResponse: "bad certificate status response",
	AlertUnknownPSKIdentity:           "unknown PSK identity",
	AlertCertificateRequired:          "certificate required",
	AlertNoApplicationProtocol:        "no application protocol",
}

// String returns the alert's name, or "alert(N)" for an unknown code.
func (a Alert) String() string {
	if s, ok := alertNames[a]; ok {
		return s
	}
	return "alert(" + strconv.Itoa(int(a)) + ")"
}

// AlertError is the error a Conn returns when a handshake or record fails
// with an alert: either one this side sent (Remote false) or one the peer
// sent (Remote true). Err, when set, says why this side sent it; it never
// carries key material.
type AlertError struct {
	Alert  Alert
	Remote bool
	Err    error
}

func (e *AlertError) Error() string {
	if e.Remote {
		return "tls13: remote error: " + e.Alert.String()
	}
	if e.Err != nil {
		return "tls13: " + e.Err.Error() + " (sent alert: " + e.Alert.String() + ")"
	}
	return "tls13: local error: " + e.Alert.String()
}

func (e *AlertError) Unwrap() error { return e.Err }

// verifyAlert is the alert sent when VerifyConnection refuses a peer:
// the one its error names (an *AlertError of this side, or an
// Alert() uint8 method such as a revocation check's
// certificate_revoked), else bad_certificate.
func verifyAlert(err error) Alert {
	if ae := (*AlertError)(nil); errors.As(err, &ae) && !ae.Remote {
		return ae.Alert
	}
	var named interface{ Alert() uint8 }
	if errors.As(err, &named) {
		if a := Alert(named.Alert()); a != AlertCloseNotify {
			return a
		}
	}
	return AlertBadCertificate
}

package tlcp

import (
	"errors"
	"strconv"
)

// Alert is a TLCP alert description (GB/T 38636-2020 §6.4.4; the codes are
// TLS 1.1's plus the GM/T 0024 gateway and IBC codes 200–205).
type Alert uint8

const (
	alertLevelWarning = 1
	alertLevelError   = 2
)

// Alert descriptions.
const (
	AlertCloseNotify            Alert = 0
	AlertUnexpectedMessage      Alert = 10
	AlertBadRecordMAC           Alert = 20
	AlertDecryptionFailed       Alert = 21
	AlertRecordOverflow         Alert = 22
	AlertDecompressionFailure   Alert = 30
	AlertHandshakeFailure       Alert = 40
	AlertBadCertificate         Alert = 42
	AlertUnsupportedCertificate Alert = 43
	AlertCertificateRevoked     Alert = 44
	AlertCertificateExpired     Alert = 45
	AlertCertificateUnknown     Alert = 46
	AlertIllegalParameter       Alert = 47
	AlertUnknownCA              Alert = 48
	AlertAccessDenied           Alert = 49
	AlertDecodeError            Alert = 50
	AlertDecryptError           Alert = 51
	AlertProtocolVersion        Alert = 70
	AlertInsufficientSecurity   Alert = 71
	AlertInternalError          Alert = 80
	AlertUserCanceled           Alert = 90
	AlertNoRenegotiation        Alert = 100
	AlertUnsupportedExtension   Alert = 110
	AlertUnrecognizedName       Alert = 112
	AlertNoApplicationProtocol  Alert = 120
	AlertUnsupportedSite2Site   Alert = 200
	AlertNoArea                 Alert = 201
	AlertUnsupportedAreaType    Alert = 202
	AlertBadIBCParam            Alert = 203
	AlertUnsupportedIBCParam    Alert = 204
	AlertIdentityNeed           Alert = 205
)

var alertNames = map[Alert]string{
	AlertCloseNotify:            "close notify",
	AlertUnexpectedMessage:      "unexpected message",
	AlertBadRecordMAC:           "bad record MAC",
	AlertDecryptionFailed:       "decryption failed",
	AlertRecordOverflow:         "record overflow",
	AlertDecompressionFailure:   "decompression failure",
	AlertHandshakeFailure:       "handshake failure",
	AlertBadCertificate:         "bad certificate",
	AlertUnsupportedCertificate: "unsupported certificate",
	AlertCertificateRevoked:     "revoked certificate",
	AlertCertificateExpired:     "expired certificate",
	AlertCertificateUnknown:     "unknown certificate",
	AlertIllegalParameter:       "illegal parameter",
	AlertUnknownCA:              "unknown certificate authority",
	AlertAccessDenied:           "access denied",
	AlertDecodeError:            "error decoding message",
	AlertDecryptError:           "error decrypting message",
	AlertProtocolVersion:        "protocol version not supported",
	AlertInsufficientSecurity:   "insufficient security level",
	AlertInternalError:          "internal error",
	AlertUserCanceled:           "user canceled",
	AlertNoRenegotiation:        "no renegotiation",
	AlertUnsupportedExtension:   "unsupported extension",
	AlertUnrecognizedName:       "unrecognized name",
	AlertNoApplicationProtocol:  "no application protocol",
	AlertUnsupportedSite2Site:   "unsupported site2site",
	AlertNoArea:                 "no area",
	AlertUnsupportedAreaType:    "unsupported area type",
	AlertBadIBCParam:            "bad IBC parameters",
	AlertUnsupportedIBCParam:    "unsupported IBC parameters",
	AlertIdentityNeed:           "identity needed",
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
// sent (Remote true). Err, when set, says why this side sent it.
type AlertError struct {
	Alert  Alert
	Remote bool
	Err    error
}

func (e *AlertError) Error() string {
	if e.Remote {
		return "tlcp: remote error: " + e.Alert.String()
	}
	if e.Err != nil {
		return "tlcp: " + e.Err.Error() + " (sent alert: " + e.Alert.String() + ")"
	}
	return "tlcp: local error: " + e.Alert.String()
}

func (e *AlertError) Unwrap() error { return e.Err }

// verifyAlert is the alert sent when VerifyConnection refuses a peer:
// the one its error names, through an *AlertError or an Alert() uint8
// method (a revocation check's certificate_revoked), else
// bad_certificate.
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

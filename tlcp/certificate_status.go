package tlcp

import "golang.org/x/crypto/cryptobyte"

// statusTypeOCSP is the CertificateStatusType ocsp (RFC 6066 §8).
const statusTypeOCSP uint8 = 1

// maxOCSPStaple bounds a stapled OCSP response a client accepts; real
// ones are a few kilobytes.
const maxOCSPStaple = 64 << 10

// certificateStatusMsg carries a stapled OCSP response (RFC 6066 §8),
// sent after the server's Certificate when the client asked for it with
// status_request and the server announced it in its ServerHello. TLCP
// (GB/T 38636) defines no such message, but Tongsuo's NTLS client asks
// for and reads it as in TLS 1.2.
type certificateStatusMsg struct {
	raw      []byte
	response []byte
}

func (m *certificateStatusMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	w := newMessage(typeCertificateStatus, 4+len(m.response))
	w.u8(statusTypeOCSP)
	w.vec(3, m.response)
	raw, err := w.finish()
	m.raw = raw
	return raw, err
}

func (m *certificateStatusMsg) unmarshal(data []byte) bool {
	*m = certificateStatusMsg{raw: data}
	s, ok := readBody(data, typeCertificateStatus)
	if !ok {
		return false
	}
	var statusType uint8
	var resp cryptobyte.String
	if !s.ReadUint8(&statusType) || statusType != statusTypeOCSP ||
		!s.ReadUint24LengthPrefixed(&resp) || resp.Empty() || len(resp) > maxOCSPStaple || !s.Empty() {
		return false
	}
	m.response = resp
	return true
}

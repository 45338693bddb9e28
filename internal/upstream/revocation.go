package upstream

import (
	"crypto/tls"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// CheckServerCertificates adds a check, such as a revocation check, to
// the verification of the targets' certificates of an https:// pool
// (tlsCheck), a tlcp:// pool (tlcpCheck) or a tls13sm:// pool
// (tls13Check): a handshake whose check fails, full or resumed, is
// refused with the alert its error names. It is called once, before the
// pool serves; pools of other schemes are left alone.
func (p *Pool) CheckServerCertificates(tlsCheck func(tls.ConnectionState) error, tlcpCheck func(tlcp.ConnectionState) error, tls13Check func(tls13.ConnectionState) error) {
	switch tr := p.Transport.(type) {
	case *tls13SMTransport:
		if tls13Check == nil {
			return
		}
		for _, cfg := range tr.configs {
			cfg.VerifyConnection = tls13Check
		}
	case *HttpTransport:
		if tr.Http.TLSClientConfig != nil && tlsCheck != nil {
			tr.Http.TLSClientConfig.VerifyConnection = tlsCheck
		}
	case *tlcpTransport:
		if tlcpCheck == nil {
			return
		}
		for _, cfg := range tr.configs {
			cfg.VerifyConnection = tlcpCheck
		}
		if tr.h2 != nil {
			for _, cfg := range tr.h2.configs {
				cfg.VerifyConnection = tlcpCheck
			}
		}
	}
}

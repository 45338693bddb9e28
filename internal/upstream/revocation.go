package upstream

import (
	"crypto/tls"

	"github.com/gmgate/gmgate/tlcp"
)

// CheckServerCertificates adds a check, such as a revocation check, to
// the verification of the targets' certificates of an https:// pool
// (tlsCheck) or a tlcp:// pool (tlcpCheck): a handshake whose check
// fails is refused with the alert its error names. It is called once,
// before the pool serves; pools of other schemes are left alone.
func (p *Pool) CheckServerCertificates(tlsCheck func(tls.ConnectionState) error, tlcpCheck func(tlcp.ConnectionState) error) {
	switch tr := p.Transport.(type) {
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

package edge

import (
	"crypto/tls"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/tlcp"
)

// loadSMPool reads a PEM file of CA certificates for client verification.
func LoadSMPool(file string) (*smx509.CertPool, error) {
	pem, err := certs.ReadCAFile("client_ca", file)
	if err != nil {
		return nil, err
	}
	return certs.CAPool(file, pem)
}

// tlcpClientAuth is the TLCP client-authentication mode a client_auth
// setting names.
func TlcpClientAuth(s string) tlcp.ClientAuthType {
	switch s {
	case "request":
		return tlcp.RequestClientCert
	case "require":
		return tlcp.RequireAnyClientCert
	case "verify_if_given":
		return tlcp.VerifyClientCertIfGiven
	case "require_and_verify":
		return tlcp.RequireAndVerifyClientCert
	}
	return tlcp.NoClientCert
}

// tlsClientAuth is tlcpClientAuth for TLS.
func TlsClientAuth(s string) tls.ClientAuthType {
	switch s {
	case "request":
		return tls.RequestClientCert
	case "require":
		return tls.RequireAnyClientCert
	case "verify_if_given":
		return tls.VerifyClientCertIfGiven
	case "require_and_verify":
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

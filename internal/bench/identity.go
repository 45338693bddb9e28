package bench

import (
	"errors"
	"fmt"
	"net"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// ServerIdentity names a TLCP server identity: certificate files and accel
// key references (file:…, sdf:…). Empty means a generated software one.
type ServerIdentity struct {
	SignCert, SignKey, EncCert, EncKey string
}

func (id ServerIdentity) empty() bool {
	return id.SignCert == "" && id.SignKey == "" && id.EncCert == "" && id.EncKey == ""
}

func (id ServerIdentity) check() error {
	if id.empty() {
		return nil
	}
	if id.SignCert == "" || id.SignKey == "" || id.EncCert == "" || id.EncKey == "" {
		return errors.New("a server identity needs all four of --sign-cert, --sign-key, --enc-cert and --enc-key")
	}
	return nil
}

// identities are what a self-started run uses: the server's TLCP and TLS
// identities as files and the load generator's dual certificate for the
// ECDHE suites.
type identities struct {
	tlcp    ServerIdentity
	tlsCert string
	tlsKey  string
	client  *tlcp.Certificate
}

// makeIdentities writes a generated SM2 CA's server pair (unless given),
// an ECDSA P-256 server certificate, and makes a client pair.
func makeIdentities(dir string, given ServerIdentity) (*identities, error) {
	ids := &identities{tlcp: given}
	names := pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	sm2CA, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		return nil, fmt.Errorf("making a local SM2 CA: %w", err)
	}
	if given.empty() {
		server, err := sm2CA.IssueDual(names)
		if err != nil {
			return nil, fmt.Errorf("issuing the server's TLCP certificates: %w", err)
		}
		f, err := server.Write(dir, "server", nil)
		if err != nil {
			return nil, err
		}
		ids.tlcp = ServerIdentity{SignCert: f.SignCert, SignKey: "file:" + f.SignKey, EncCert: f.EncCert, EncKey: "file:" + f.EncKey}
	}
	client, err := sm2CA.IssueDual(pki.IssueOptions{DNSNames: []string{"gmgate-bench-client"}})
	if err != nil {
		return nil, fmt.Errorf("issuing the load generator's TLCP certificates: %w", err)
	}
	ids.client = client.Certificate()

	ecCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		return nil, fmt.Errorf("making a local ECDSA CA: %w", err)
	}
	leaf, err := ecCA.IssueTLS(names)
	if err != nil {
		return nil, fmt.Errorf("issuing the server's TLS certificate: %w", err)
	}
	if ids.tlsCert, ids.tlsKey, err = leaf.Write(dir, "tls", nil); err != nil {
		return nil, err
	}
	ids.tlsKey = "file:" + ids.tlsKey
	return ids, nil
}

// clientIdentity makes only the load generator's dual certificate, for
// remote targets.
func clientIdentity() (*tlcp.Certificate, error) {
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		return nil, fmt.Errorf("making a local SM2 CA: %w", err)
	}
	client, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"gmgate-bench-client"}})
	if err != nil {
		return nil, fmt.Errorf("issuing the load generator's TLCP certificates: %w", err)
	}
	return client.Certificate(), nil
}

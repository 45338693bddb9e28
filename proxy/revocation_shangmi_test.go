package proxy

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// A site's client_revocation holds for TLS 1.3 ShangMi as for TLCP: a
// client certificate revoked by the site's CRL is refused with
// certificate_revoked, on a full handshake and on the resumption of a
// ticket issued before the revocation.
func TestShangMiRefusesRevokedClientCertificate(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	client, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "sm-client"}})
	if err != nil {
		t.Fatal(err)
	}
	crl := func(serials ...*big.Int) []byte {
		now := time.Now()
		tmpl := &smx509.RevocationList{Number: big.NewInt(now.UnixNano()), ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour)}
		for _, s := range serials {
			tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, smx509.RevocationListEntry{SerialNumber: s, RevocationTime: now.Add(-time.Minute)})
		}
		der, err := smx509.CreateRevocationList(rand.Reader, tmpl, p.ca.Root, p.ca.RootKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	var current atomic.Pointer[[]byte]
	empty := crl()
	current.Store(&empty)
	crlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(*current.Load()) }))
	defer crlSrv.Close()

	newConfig := func() *config.Config {
		cfg := testConfig(p, up.URL)
		tc := cfg.Listeners[0].TLCP
		tc.ClientAuth, tc.ClientCA = "require_and_verify", p.dual.CACert
		tc.ClientRevocation = &config.Revocation{CRL: []string{crlSrv.URL}, Refresh: config.Duration(time.Hour)}
		config.Defaults(cfg)
		return cfg
	}
	s := startServer(t, newConfig(), nil)
	cc := &tls13.Config{
		Certificates:       []tls13.Certificate{{Certificate: [][]byte{client.SignCert.Raw}, PrivateKey: client.SignKey}},
		ClientSessionCache: tls13.NewLRUClientSessionCache(4),
	}
	if smResumes(t, p, s, cc) {
		t.Fatal("the first handshake resumed")
	}
	if !smResumes(t, p, s, cc) {
		t.Fatal("the ticket of a good client certificate did not resume")
	}

	revoked := crl(client.SignCert.SerialNumber)
	current.Store(&revoked)
	if err := s.Reload(newConfig()); err != nil { // reads the CRL again
		t.Fatal(err)
	}
	// The client still holds a ticket: the first attempt offers it, the
	// second (the ticket is not kept after a refusal, or is offered
	// again) is a full handshake or another resumption. Both must fail.
	for i := range 2 {
		cfg := cc.Clone()
		cfg.RootCAs, cfg.ServerName = p.roots, "localhost"
		conn, err := tls13.Dial("tcp", s.Addr("edge").String(), cfg)
		if err == nil {
			// TLS 1.3: the client's handshake ends before the server
			// has judged its certificate; the refusal comes as an alert.
			_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		var ae *tls13.AlertError
		if !errors.As(err, &ae) || !ae.Remote || ae.Alert != tls13.AlertCertificateRevoked {
			t.Fatalf("attempt %d with a revoked certificate: %v, want the certificate_revoked alert", i, err)
		}
	}
}

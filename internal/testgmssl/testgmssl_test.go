package testgmssl

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/tlcp"
)

func pair(d testpki.Dual) tlcp.Certificate {
	return tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
}

// The wrapped server refuses the standard profile's answer to its
// CertificateRequest with the alert GmSSL 3 sends, and completes the
// handshake with the gmssl profile, in both kinds of suite.
func TestRefusesTheStandardProfile(t *testing.T) {
	ca := testpki.NewCA(t, "CA")
	srv := pair(ca.IssueDual(t, "localhost", []string{"localhost"}, nil))
	cli := pair(ca.IssueDual(t, "client", nil, nil))
	for _, tc := range []struct {
		suite uint16
		alert tlcp.Alert
	}{
		{tlcp.ECC_SM4_GCM_SM3, tlcp.AlertBadCertificate},
		{tlcp.ECDHE_SM4_GCM_SM3, tlcp.AlertDecodeError},
	} {
		for _, profile := range []string{tlcp.ProfileStandard, tlcp.ProfileGmSSL} {
			t.Run(tlcp.CipherSuiteName(tc.suite)+"/"+profile, func(t *testing.T) {
				cc, sc := net.Pipe()
				scfg := &tlcp.Config{Certificates: []tlcp.Certificate{srv}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Roots, CipherSuites: []uint16{tc.suite}}
				done := make(chan error, 1)
				go func() {
					s := tlcp.Server(Conn(sc), scfg)
					done <- s.HandshakeContext(context.Background())
					sc.Close()
				}()
				ccfg := &tlcp.Config{RootCAs: ca.Roots, ServerName: "localhost", Certificates: []tlcp.Certificate{cli}, CipherSuites: []uint16{tc.suite}}
				if err := ccfg.SetClientProfile(profile); err != nil {
					t.Fatal(err)
				}
				c := tlcp.Client(cc, ccfg)
				err := c.HandshakeContext(context.Background())
				cc.Close()
				serr := <-done
				if profile == tlcp.ProfileGmSSL {
					if err != nil || serr != nil {
						t.Fatalf("gmssl profile: client %v, server %v", err, serr)
					}
					return
				}
				var ae *tlcp.AlertError
				if !errors.As(err, &ae) || !ae.Remote || ae.Alert != tc.alert {
					t.Fatalf("standard profile: client got %v, want the server's %v", err, tc.alert)
				}
				if !errors.Is(serr, ErrRefused) {
					t.Fatalf("server: %v", serr)
				}
			})
		}
	}
}

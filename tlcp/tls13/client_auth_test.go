package tls13

import (
	"io"
	"testing"
)

// TestClientAuthLevels runs every ClientAuth level against a client with
// no certificate, a trusted one and one from an unrelated CA.
func TestClientAuthLevels(t *testing.T) {
	p := getPKI(t)
	untrusted := issue(t, p.otherCA, "stranger.test", nil, nil)
	type outcome int
	const (
		anonymous  outcome = iota // handshake succeeds, no client identity
		unverified                // succeeds, certificates without chains
		verified                  // succeeds, certificates verified
		required                  // fails: certificate_required
		unknownCA                 // fails: unknown_ca
	)
	idents := []struct {
		name string
		cert *Certificate
	}{{"none", nil}, {"trusted", &p.client}, {"untrusted", &untrusted}}
	for _, tc := range []struct {
		level ClientAuthType
		want  [3]outcome
	}{
		{NoClientCert, [3]outcome{anonymous, anonymous, anonymous}},
		{RequestClientCert, [3]outcome{anonymous, unverified, unverified}},
		{RequireAnyClientCert, [3]outcome{required, unverified, unverified}},
		{VerifyClientCertIfGiven, [3]outcome{anonymous, verified, unknownCA}},
		{RequireAndVerifyClientCert, [3]outcome{required, verified, unknownCA}},
	} {
		for i, id := range idents {
			t.Run(tc.level.String()+"/"+id.name, func(t *testing.T) {
				scfg, ccfg := serverConfig(t), clientConfig(t)
				scfg.ClientAuth = tc.level
				if id.cert != nil {
					ccfg.Certificates = []Certificate{*id.cert}
				}
				cli, srv, cerr, serr := handshakePair(t, scfg, ccfg)
				want := tc.want[i]
				switch want {
				case required, unknownCA:
					alert := AlertCertificateRequired
					if want == unknownCA {
						alert = AlertUnknownCA
					}
					if a, remote, ok := alertOf(serr); !ok || a != alert || remote {
						t.Fatalf("server: %v, want %v", serr, alert)
					}
					// The client finished first; the alert ends its
					// first read.
					if cerr == nil {
						_, cerr = cli.Read(make([]byte, 1))
					}
					if a, remote, ok := alertOf(cerr); !ok || a != alert || !remote {
						t.Fatalf("client: %v, want remote %v", cerr, alert)
					}
					return
				}
				if cerr != nil || serr != nil {
					t.Fatalf("client %v, server %v", cerr, serr)
				}
				st := srv.ConnectionState()
				switch want {
				case anonymous:
					if len(st.PeerCertificates) != 0 {
						t.Fatal("server has client certificates")
					}
				case unverified:
					if len(st.PeerCertificates) == 0 || len(st.VerifiedChains) != 0 {
						t.Fatalf("certificates %d, chains %d", len(st.PeerCertificates), len(st.VerifiedChains))
					}
				case verified:
					if len(st.PeerCertificates) == 0 || len(st.VerifiedChains) == 0 {
						t.Fatalf("certificates %d, chains %d", len(st.PeerCertificates), len(st.VerifiedChains))
					}
				}
				exchange(t, cli, srv, []byte("authenticated"))
			})
		}
	}
}

func TestClientCertificateCallback(t *testing.T) {
	p := getPKI(t)
	scfg, ccfg := serverConfig(t), clientConfig(t)
	scfg.ClientAuth = RequireAndVerifyClientCert
	var asked bool
	ccfg.GetClientCertificate = func(info *CertificateRequestInfo) (*Certificate, error) {
		asked = len(info.AcceptableCAs) > 0 && info.SignatureSchemes[0] == SM2SigSM3
		return &p.client, nil
	}
	cli, srv := mustHandshake(t, scfg, ccfg)
	if !asked {
		t.Fatal("GetClientCertificate not called with the request's CAs")
	}
	if _, err := cli.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(srv, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

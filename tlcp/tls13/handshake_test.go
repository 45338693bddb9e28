package tls13

import (
	"bytes"
	"testing"
)

func TestHandshakeGroups(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client []CurveID
		server []CurveID
		suite  uint16
		want   CurveID
	}{
		{"curveSM2", []CurveID{CurveSM2}, nil, TLS_SM4_GCM_SM3, CurveSM2},
		{"hybrid", []CurveID{CurveSM2MLKEM768}, nil, TLS_SM4_GCM_SM3, CurveSM2MLKEM768},
		{"default prefers hybrid", nil, nil, TLS_SM4_GCM_SM3, CurveSM2MLKEM768},
		{"server prefers curveSM2 with a share", nil, []CurveID{CurveSM2, CurveSM2MLKEM768}, TLS_SM4_GCM_SM3, CurveSM2},
		{"ccm", []CurveID{CurveSM2}, nil, TLS_SM4_CCM_SM3, CurveSM2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !mlkemUsable && tc.want == CurveSM2MLKEM768 {
				if tc.client != nil {
					requireHybrid(t)
				}
				// Without ML-KEM the defaults fall back to curveSM2.
				tc.want = CurveSM2
			}
			scfg, ccfg := serverConfig(t), clientConfig(t)
			scfg.CurvePreferences = tc.server
			ccfg.CurvePreferences = tc.client
			ccfg.CipherSuites = []uint16{tc.suite}
			cli, srv := mustHandshake(t, scfg, ccfg)
			for _, st := range []ConnectionState{cli.ConnectionState(), srv.ConnectionState()} {
				if st.Version != VersionTLS13 || st.CipherSuite != tc.suite || st.Group != tc.want || st.DidResume || st.DidHelloRetryRequest {
					t.Fatalf("state %+v", st)
				}
			}
			if len(cli.ConnectionState().VerifiedChains) == 0 {
				t.Fatal("client did not verify the server")
			}
			exchange(t, cli, srv, []byte("hello over TLS 1.3 ShangMi"))
			exchange(t, srv, cli, bytes.Repeat([]byte("x"), 100000))
		})
	}
}

func TestHelloRetryRequest(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server []CurveID
		want           CurveID
	}{
		// The client's first share is curveSM2 only; the server takes
		// only the hybrid.
		{"to hybrid", []CurveID{CurveSM2, CurveSM2MLKEM768}, []CurveID{CurveSM2MLKEM768}, CurveSM2MLKEM768},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireHybrid(t)
			scfg, ccfg := serverConfig(t), clientConfig(t)
			scfg.CurvePreferences, ccfg.CurvePreferences = tc.server, tc.client
			cli, srv := mustHandshake(t, scfg, ccfg)
			for _, st := range []ConnectionState{cli.ConnectionState(), srv.ConnectionState()} {
				if !st.DidHelloRetryRequest || st.Group != tc.want {
					t.Fatalf("state %+v", st)
				}
			}
			exchange(t, cli, srv, []byte("after a retry"))
		})
	}
}

func TestNoCommonGroup(t *testing.T) {
	scfg, ccfg := serverConfig(t), clientConfig(t)
	scfg.CurvePreferences = []CurveID{CurveSM2MLKEM768}
	ccfg.CurvePreferences = []CurveID{CurveSM2}
	_, _, cerr, serr := handshakePair(t, scfg, ccfg)
	if a, _, ok := alertOf(serr); !ok || a != AlertHandshakeFailure {
		t.Fatalf("server: %v", serr)
	}
	if a, remote, ok := alertOf(cerr); !ok || a != AlertHandshakeFailure || !remote {
		t.Fatalf("client: %v", cerr)
	}
}

func TestALPNAndSNI(t *testing.T) {
	p := getPKI(t)
	other := issue(t, p.ca, "other.test", []string{"other.test"}, nil)
	scfg := serverConfig(t)
	scfg.NextProtos = []string{"h2", "http/1.1"}
	var seen string
	scfg.GetCertificate = func(hi *ClientHelloInfo) (*Certificate, error) {
		seen = hi.ServerName
		if hi.ServerName == "other.test" {
			return &other, nil
		}
		return nil, nil
	}
	for _, tc := range []struct {
		name, server string
		protos       []string
		want         string
	}{
		{"h2", "server.test", []string{"h2", "http/1.1"}, "h2"},
		{"http/1.1", "other.test", []string{"http/1.1"}, "http/1.1"},
		{"server order wins", "server.test", []string{"http/1.1", "h2"}, "h2"},
		{"no ALPN", "server.test", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.ServerName = tc.server
			ccfg.NextProtos = tc.protos
			cli, srv := mustHandshake(t, scfg, ccfg)
			if got := cli.ConnectionState().NegotiatedProtocol; got != tc.want {
				t.Fatalf("client ALPN %q, want %q", got, tc.want)
			}
			if got := srv.ConnectionState().NegotiatedProtocol; got != tc.want {
				t.Fatalf("server ALPN %q, want %q", got, tc.want)
			}
			if seen != tc.server || srv.ConnectionState().ServerName != tc.server {
				t.Fatalf("server saw SNI %q / %q, want %q", seen, srv.ConnectionState().ServerName, tc.server)
			}
			if cn := cli.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != tc.server {
				t.Fatalf("server presented %q", cn)
			}
		})
	}
	t.Run("no common protocol", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.NextProtos = []string{"spdy/3"}
		_, _, cerr, serr := handshakePair(t, scfg, ccfg)
		if a, _, ok := alertOf(serr); !ok || a != AlertNoApplicationProtocol {
			t.Fatalf("server: %v", serr)
		}
		if a, _, ok := alertOf(cerr); !ok || a != AlertNoApplicationProtocol {
			t.Fatalf("client: %v", cerr)
		}
	})
}

func TestServerCertificateChecks(t *testing.T) {
	t.Run("wrong name", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.ServerName = "elsewhere.test"
		_, _, cerr, _ := handshakePair(t, serverConfig(t), ccfg)
		if a, remote, ok := alertOf(cerr); !ok || a != AlertBadCertificate || remote {
			t.Fatalf("client: %v", cerr)
		}
	})
	t.Run("unknown CA", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.RootCAs = getPKI(t).otherCA.Roots
		_, _, cerr, serr := handshakePair(t, serverConfig(t), ccfg)
		if a, _, ok := alertOf(cerr); !ok || a != AlertUnknownCA {
			t.Fatalf("client: %v", cerr)
		}
		if a, remote, ok := alertOf(serr); !ok || a != AlertUnknownCA || !remote {
			t.Fatalf("server: %v", serr)
		}
	})
	t.Run("signature ID mismatch", func(t *testing.T) {
		// A peer that signs CertificateVerify with another ID does not
		// verify: the ID is part of what is signed.
		ccfg := clientConfig(t)
		ccfg.SignatureID = "1234567812345678"
		_, _, cerr, _ := handshakePair(t, serverConfig(t), ccfg)
		if a, _, ok := alertOf(cerr); !ok || a != AlertDecryptError {
			t.Fatalf("client: %v", cerr)
		}
	})
	t.Run("signature ID configured on both sides", func(t *testing.T) {
		scfg, ccfg := serverConfig(t), clientConfig(t)
		scfg.SignatureID, ccfg.SignatureID = "1234567812345678", "1234567812345678"
		mustHandshake(t, scfg, ccfg)
	})
}

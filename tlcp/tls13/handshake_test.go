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

package tlcp

import (
	"bytes"
	"net"
	"testing"
)

// handshakePipe runs a handshake of ccfg against scfg over a pipe and
// returns the client's view of it.
func handshakePipe(t *testing.T, ccfg, scfg *Config) ConnectionState {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	client, server := Client(c, ccfg), Server(s, scfg)
	handshakeBoth(t, client, server)
	return client.ConnectionState()
}

// TestOCSPStapleInTLCP: a client that asks (status_request) gets the
// server's stapled OCSP response in a CertificateStatus message, on full
// handshakes only; one that does not ask, or a server with nothing to
// staple, sends and gets none.
func TestOCSPStapleInTLCP(t *testing.T) {
	staple := []byte("an OCSP response")
	scfg := serverConfig(t)
	scfg.Certificates[0].OCSPStaple = staple
	scfg.SessionCache = NewLRUSessionCache(8, 0)

	ccfg := clientConfig(t)
	ccfg.RequestOCSPStaple = true
	ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		ccfg.CipherSuites = []uint16{suite}
		ccfg.ClientSessionCache = NewLRUClientSessionCache(8, 0)
		st := handshakePipe(t, ccfg, scfg)
		if st.DidResume || !bytes.Equal(st.OCSPResponse, staple) {
			t.Fatalf("%s full handshake: resumed %v, OCSP response %q", CipherSuiteName(suite), st.DidResume, st.OCSPResponse)
		}
		st = handshakePipe(t, ccfg, scfg)
		if !st.DidResume || st.OCSPResponse != nil {
			t.Fatalf("%s resumption: resumed %v, OCSP response %q", CipherSuiteName(suite), st.DidResume, st.OCSPResponse)
		}
	}

	plain := clientConfig(t)
	if st := handshakePipe(t, plain, scfg); st.OCSPResponse != nil {
		t.Errorf("a client that did not ask got %q", st.OCSPResponse)
	}
	none := serverConfig(t)
	ccfg.ClientSessionCache = nil
	if st := handshakePipe(t, ccfg, none); st.OCSPResponse != nil {
		t.Errorf("a server with nothing to staple sent %q", st.OCSPResponse)
	}
}

// A CertificateStatus carries an OCSP response and nothing else.
func TestCertificateStatusOnlyOCSP(t *testing.T) {
	m := &certificateStatusMsg{response: []byte{1, 2, 3}}
	b, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m2 certificateStatusMsg
	if !m2.unmarshal(b) || !bytes.Equal(m2.response, m.response) {
		t.Fatal("round trip")
	}
	b[4] = 2 // a status type other than ocsp
	if m2.unmarshal(b) {
		t.Error("a CertificateStatus of type 2 was accepted")
	}
}

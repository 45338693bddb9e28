package tlcp

import (
	"errors"
	"github.com/emmansun/gmsm/smx509"
	"strings"
	"testing"
)

func TestSNISelectsCertificate(t *testing.T) {
	p := getPKI(t)
	other := issueDual(t, p.ca, "other.test", []string{"other.test"}, nil)
	scfg := serverConfig(t)
	var seen []string
	scfg.GetCertificate = func(hi *ClientHelloInfo) (*Certificate, error) {
		seen = append(seen, hi.ServerName)
		if hi.ServerName == "other.test" {
			return &other, nil
		}
		return nil, nil // fall back to Certificates
	}
	for _, name := range []string{"other.test", "server.test"} {
		ccfg := clientConfig(t)
		ccfg.ServerName = name
		ccfg.SendServerName = true
		client, server, cerr, serr := handshakePair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatalf("%s: client %v, server %v", name, cerr, serr)
		}
		if got := client.ConnectionState().PeerCertificates[0].Subject.CommonName; got != name {
			t.Fatalf("asked for %s, got certificate for %s", name, got)
		}
		if got := server.ConnectionState().ServerName; got != name {
			t.Fatalf("server saw SNI %q, want %q", got, name)
		}
	}
	if len(seen) != 2 || seen[0] != "other.test" {
		t.Fatalf("GetCertificate saw %q", seen)
	}
}

func TestNoExtensionsByDefault(t *testing.T) {
	// GmSSL 3.1 rejects any ClientHello extension: by default our client
	// sends none, and the server copes with that.
	scfg := serverConfig(t)
	var info *ClientHelloInfo
	scfg.GetConfigForClient = func(hi *ClientHelloInfo) (*Config, error) {
		info = hi
		return nil, nil
	}
	if _, _, cerr, serr := handshakePair(t, clientConfig(t), scfg); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if info == nil || info.HasExtensions || info.ServerName != "" {
		t.Fatalf("ClientHello carried extensions: %+v", info)
	}
}

func TestGetConfigForClient(t *testing.T) {
	p := getPKI(t)
	alt := issueDual(t, p.ca, "alt.test", []string{"alt.test"}, nil)
	scfg := serverConfig(t)
	scfg.GetConfigForClient = func(hi *ClientHelloInfo) (*Config, error) {
		if hi.ServerName == "alt.test" {
			return &Config{Certificates: []Certificate{alt}, CipherSuites: []uint16{ECC_SM4_CBC_SM3}}, nil
		}
		if hi.ServerName == "refuse.test" {
			return nil, errors.New("no such site")
		}
		if hi.ServerName == "unknown.test" {
			return nil, &AlertError{Alert: AlertUnrecognizedName, Err: errors.New("no site for unknown.test")}
		}
		return nil, nil
	}
	ccfg := clientConfig(t)
	ccfg.ServerName, ccfg.SendServerName = "alt.test", true
	client, _, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	st := client.ConnectionState()
	if st.CipherSuite != ECC_SM4_CBC_SM3 || st.PeerCertificates[0].Subject.CommonName != "alt.test" {
		t.Fatalf("GetConfigForClient not applied: %s, %s", CipherSuiteName(st.CipherSuite), st.PeerCertificates[0].Subject)
	}
	ccfg = clientConfig(t)
	ccfg.ServerName, ccfg.SendServerName, ccfg.InsecureSkipVerify = "refuse.test", true, true
	_, _, cerr, serr = handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertInternalError)

	// An *AlertError names the alert sent, and its cause stays the
	// server's error.
	ccfg.ServerName = "unknown.test"
	_, _, cerr, serr = handshakePair(t, ccfg, scfg)
	assertAlert(t, serr, cerr, AlertUnrecognizedName)
	if serr == nil || !strings.Contains(serr.Error(), "no site for unknown.test") {
		t.Errorf("server error %v lacks the cause", serr)
	}
}

func TestALPN(t *testing.T) {
	for _, tc := range []struct {
		client, server []string
		want           string
		alert          Alert
	}{
		{[]string{"h2", "http/1.1"}, []string{"http/1.1"}, "http/1.1", 0},
		{[]string{"http/1.1"}, nil, "", 0},
		{nil, []string{"http/1.1"}, "", 0},
		{[]string{"h2"}, []string{"http/1.1"}, "", AlertNoApplicationProtocol},
	} {
		ccfg := clientConfig(t)
		ccfg.NextProtos = tc.client
		scfg := serverConfig(t)
		scfg.NextProtos = tc.server
		client, server, cerr, serr := handshakePair(t, ccfg, scfg)
		if tc.alert != 0 {
			assertAlert(t, serr, cerr, tc.alert)
			continue
		}
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if got := client.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Fatalf("client %q server %q: negotiated %q, want %q", tc.client, tc.server, got, tc.want)
		}
		if got := server.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Fatalf("server negotiated %q, want %q", got, tc.want)
		}
	}
}

func TestVerifyHooks(t *testing.T) {
	ccfg := clientConfig(t)
	var raw int
	var chains int
	ccfg.VerifyPeerCertificate = func(rawCerts [][]byte, verified [][]*smx509.Certificate) error {
		raw, chains = len(rawCerts), len(verified)
		return nil
	}
	ccfg.VerifyConnection = func(cs ConnectionState) error {
		if cs.CipherSuite == 0 || len(cs.PeerCertificates) != 2 {
			return errors.New("incomplete state")
		}
		return nil
	}
	if _, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t)); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if raw != 2 || chains == 0 {
		t.Fatalf("VerifyPeerCertificate saw %d certificates, %d chains", raw, chains)
	}
	ccfg.VerifyConnection = func(ConnectionState) error { return errors.New("pinned key mismatch") }
	_, _, cerr, serr := handshakePair(t, ccfg, serverConfig(t))
	assertAlert(t, cerr, serr, AlertBadCertificate)
}

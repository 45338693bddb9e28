package tlcphint

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/tlcp"
)

var flags = Names{Profile: func(p string) string { return "--profile " + p }, Cert: "--cert", EncCert: "--enc-cert"}

func pair(d testpki.Dual) tlcp.Certificate {
	return tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
}

// handshake runs one handshake of client against server over a pipe and
// returns the client's error and what it recorded.
func handshake(t *testing.T, client, server *tlcp.Config, profile string) (Facts, error) {
	t.Helper()
	cc, sc := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := tlcp.Server(sc, server)
		_ = s.HandshakeContext(context.Background())
		s.Close()
	}()
	cfg, facts := Record(client, profile)
	if err := cfg.SetClientProfile(profile); err != nil {
		t.Fatal(err)
	}
	err := tlcp.Client(cc, cfg).HandshakeContext(context.Background())
	cc.Close()
	<-done
	return *facts, err
}

func TestHintNamesWhatTheServerAskedFor(t *testing.T) {
	ca, other := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "unknown CA")
	srv := pair(ca.IssueDual(t, "localhost", []string{"localhost"}, nil))
	stranger := pair(other.IssueDual(t, "client", nil, nil))
	asks := &tlcp.Config{Certificates: []tlcp.Certificate{srv}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Roots}
	client := func(c ...tlcp.Certificate) *tlcp.Config {
		return &tlcp.Config{RootCAs: ca.Roots, ServerName: "localhost", Certificates: c, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
	}
	for _, tc := range []struct {
		name    string
		client  *tlcp.Config
		server  *tlcp.Config
		profile string
		want    string
		asked   bool
	}{
		{"no certificate", client(), asks, "standard", "the server asked for a client certificate and none was given: give --cert (and --enc-cert", true},
		{"untrusted, standard", client(stranger), asks, "standard", "refused the answer of profile standard: check that it trusts the issuer of --cert; a GmSSL 3 server needs --profile gmssl", true},
		{"untrusted, gmssl", client(stranger), asks, "gmssl", "refused the answer of profile gmssl, which only GmSSL 3 servers take: for Tongsuo, gotlcp, gmgate and most servers use --profile standard", true},
	} {
		facts, err := handshake(t, tc.client, tc.server, tc.profile)
		var ae *tlcp.AlertError
		if !errors.As(err, &ae) || !ae.Remote {
			t.Fatalf("%s: want the server's alert, got %v", tc.name, err)
		}
		if facts.CertificateRequested != tc.asked || !facts.ServerCertificates {
			t.Errorf("%s: recorded %+v", tc.name, facts)
		}
		if h := Hint(err, facts, flags); !strings.Contains(h, tc.want) {
			t.Errorf("%s: hint %q, want %q", tc.name, h, tc.want)
		}
	}
	// A server that does not ask: the handshake works, and a local
	// verification error needs no hint.
	open := &tlcp.Config{Certificates: []tlcp.Certificate{srv}}
	if facts, err := handshake(t, client(stranger), open, "gmssl"); err != nil || facts.CertificateRequested {
		t.Errorf("open server: %v, %+v", err, facts)
	}
	wrongName := client()
	wrongName.ServerName = "elsewhere"
	facts, err := handshake(t, wrongName, open, "standard")
	if err == nil || Hint(err, facts, flags) != "" {
		t.Errorf("a certificate for another name: %v, hint %q", err, Hint(err, facts, flags))
	}
}

func TestHintProtocolVersion(t *testing.T) {
	err := &tlcp.AlertError{Alert: tlcp.AlertProtocolVersion, Remote: true}
	if h := Hint(err, Facts{}, flags); !strings.Contains(h, "TLS only") {
		t.Errorf("%q", h)
	}
	if h := Hint(nil, Facts{}, flags); h != "" {
		t.Errorf("no error: %q", h)
	}
}

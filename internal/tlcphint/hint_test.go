package tlcphint

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testgmssl"
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

// gmsslHandshake is handshake against a server that refuses the
// standard profile as GmSSL 3 does.
func gmsslHandshake(t *testing.T, client, server *tlcp.Config, profile string) (Facts, error) {
	t.Helper()
	cc, sc := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tlcp.Server(testgmssl.Conn(sc), server).HandshakeContext(context.Background())
		sc.Close()
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

// ProfileRefused tells the refusal of the client's answer to a
// CertificateRequest, which the other profile may avoid, from failures
// that no profile changes.
func TestProfileRefused(t *testing.T) {
	ca := testpki.NewCA(t, "server CA")
	srv := pair(ca.IssueDual(t, "localhost", []string{"localhost"}, nil))
	id := pair(ca.IssueDual(t, "client", nil, nil))
	asks := &tlcp.Config{Certificates: []tlcp.Certificate{srv}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Roots}
	client := func(c ...tlcp.Certificate) *tlcp.Config {
		return &tlcp.Config{RootCAs: ca.Roots, ServerName: "localhost", Certificates: c, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
	}
	facts, err := gmsslHandshake(t, client(id), asks, tlcp.ProfileStandard)
	if err == nil || !ProfileRefused(err, facts) {
		t.Fatalf("GmSSL-style server, standard profile: %v, refused by profile %v", err, ProfileRefused(err, facts))
	}
	if facts, err := gmsslHandshake(t, client(id), asks, tlcp.ProfileGmSSL); err != nil {
		t.Fatalf("GmSSL-style server, gmssl profile: %v (%+v)", err, facts)
	}
	// No certificate to give: both profiles send the same.
	facts, err = gmsslHandshake(t, client(), asks, tlcp.ProfileStandard)
	if err == nil || ProfileRefused(err, facts) {
		t.Fatalf("no client certificate: %v, refused by profile %v", err, ProfileRefused(err, facts))
	}
	// A certificate for another name fails at the client.
	wrongName := client(id)
	wrongName.ServerName = "elsewhere"
	facts, err = handshake(t, wrongName, asks, tlcp.ProfileStandard)
	if err == nil || ProfileRefused(err, facts) {
		t.Fatalf("another name: %v, refused by profile %v", err, ProfileRefused(err, facts))
	}
}

// The hint names the profile that was set and the case GmSSL's ECDHE
// without a CA file makes, under either profile; after both profiles it
// names neither.
func TestHintForEachProfile(t *testing.T) {
	refused := &tlcp.AlertError{Alert: tlcp.AlertInternalError, Remote: true}
	asked := Facts{ServerCertificates: true, CertificateRequested: true, ClientCert: true, ECDHE: true}
	for _, tc := range []struct {
		profile string
		want    []string
		not     string
	}{
		{"gmssl", []string{"use --profile standard", "a GmSSL server without a CA file answers the ECDHE suites with internal_error"}, "needs --profile gmssl"},
		{"standard", []string{"a GmSSL 3 server needs --profile gmssl", "a GmSSL server without a CA file"}, "use --profile standard"},
		{ProfileAuto, []string{"refused the answers of both profiles", "a GmSSL server without a CA file"}, "--profile"},
	} {
		f := asked
		f.Profile = tc.profile
		h := Hint(refused, f, flags)
		for _, w := range tc.want {
			if !strings.Contains(h, w) {
				t.Errorf("%s: hint %q lacks %q", tc.profile, h, w)
			}
		}
		if strings.Contains(h, tc.not) {
			t.Errorf("%s: hint %q says %q", tc.profile, h, tc.not)
		}
	}
}

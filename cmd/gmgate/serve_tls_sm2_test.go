package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// shangMiClient is a TLS 1.3 ShangMi client of the revoke fixture's SM2
// CA, with the named client's signing pair ("" for none) and a ticket
// cache of its own.
func (f *revokeFixture) shangMiClient(t *testing.T, who, serverName string) *tls13.Config {
	t.Helper()
	pem, err := os.ReadFile(f.path("sm2-ca/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls13.Config{ServerName: serverName, RootCAs: smx509.NewCertPool(), ClientSessionCache: tls13.NewLRUClientSessionCache(4)}
	cfg.RootCAs.AppendCertsFromPEM(pem)
	if who != "" {
		base := f.path("sm2-ca-certs/" + who + ".example.cn")
		pair, err := tlcp.LoadX509KeyPair(base+".sign.crt", base+".sign.key", base+".enc.crt", base+".enc.key")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls13.Certificate{{Certificate: pair.SignCertificate, PrivateKey: pair.SignKey.(crypto.Signer)}}
	}
	return cfg
}

// getShangMi connects over TLS 1.3 ShangMi, sends a request and returns
// the handshake's state and the answer's body; an error is the
// handshake's or the request's (a server refuses a client certificate
// after the client's handshake is over, so such a refusal comes with
// the request).
func getShangMi(addr string, cfg *tls13.Config) (tls13.ConnectionState, string, error) {
	c, err := (&tls13.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return tls13.ConnectionState{}, "", err
	}
	defer c.Close()
	tc := c.(*tls13.Conn)
	code, body, err := tryRequest(tc, "localhost", "/")
	if err == nil && code != 200 {
		err = fmt.Errorf("answered %d %q", code, body)
	}
	return tc.ConnectionState(), body, err
}

// wantShangMiAlert fails unless err is the alert a TLS 1.3 ShangMi server
// sent, or (for a refusal that comes while the client writes its
// request) the connection closed under the client.
func wantShangMiAlert(t *testing.T, what string, err error, want tls13.Alert) {
	t.Helper()
	var ae *tls13.AlertError
	switch {
	case errors.As(err, &ae) && ae.Remote && ae.Alert == want:
	case err != nil && want != tls13.AlertUnrecognizedName && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)):
	default:
		t.Errorf("%s: %v, want the alert %s from the server", what, err, want)
	}
}

// TestServeTLSListenerShangMi runs gmgate serve with a tls listener whose
// site has an SM2 identity (tls.sm2) beside its ECDSA certificate: a TLS
// 1.3 ShangMi client gets a request answered over a full and then a
// resumed handshake, without and with a client certificate (verified
// against tls.sm2.client_ca, and named to the upstream); crypto/tls
// clients are served on the same port; tls.client_revocation refuses a
// revoked SM2 client certificate, and after a reload a ticket issued
// before its revocation; a name no site serves gets unrecognized_name.
func TestServeTLSListenerShangMi(t *testing.T) {
	f := newRevokeFixture(t)
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "sm2-ca", "sm2-ca-certs/alice.example.cn.sign.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "sm2-ca")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "protocol=%s subject=%s resumed=%s", r.Header.Get("X-Proto"), r.Header.Get("X-Subject"), r.Header.Get("X-Resumed"))
	}))
	t.Cleanup(up.Close)
	listener := `  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    session_headers: {protocol: X-Proto, client_subject: X-Subject, resumed: X-Resumed}
    sites:
      - name: gm
        hosts: [localhost]
        tls:
          cert: tls-ca-certs/localhost.crt
          key: tls-ca-certs/localhost.key
          client_auth: verify_if_given
          client_ca: tls-ca/ca.crt
          client_revocation: {crl: [tls-ca/crl.pem, sm2-ca/crl.pem]}
          sm2:
            cert: sm2-ca-certs/localhost.sign.crt
            key: file:sm2-ca-certs/localhost.sign.key
            client_ca: sm2-ca/ca.crt
        routes: [{upstream: app}]
`
	srv := f.serveUpstreams(t, listener, fmt.Sprintf("  app: {targets: [%q]}\n", up.URL), "edge")
	addr := srv.addrs["edge"]

	bob := f.shangMiClient(t, "bob", "localhost")
	for _, c := range []struct {
		name    string
		cfg     *tls13.Config
		subject string
	}{
		{"no client certificate", f.shangMiClient(t, "", "localhost"), ""},
		{"client certificate", bob, "bob.example.cn"},
	} {
		for _, resumed := range []bool{false, true} {
			st, body, err := getShangMi(addr, c.cfg)
			if err != nil {
				t.Fatalf("%s, resumed %v: %v\n%s", c.name, resumed, err, srv.logs)
			}
			if st.DidResume != resumed || st.CipherSuite != tls13.TLS_SM4_GCM_SM3 {
				t.Errorf("%s: resumed %v (want %v), suite %s", c.name, st.DidResume, resumed, tls13.CipherSuiteName(st.CipherSuite))
			}
			if !strings.HasPrefix(body, "protocol=tls1.3-sm subject=") || !strings.Contains(body, c.subject) ||
				(c.subject == "") != strings.Contains(body, "subject= ") || !strings.HasSuffix(body, fmt.Sprintf("resumed=%v", resumed)) {
				t.Errorf("%s, resumed %v: the upstream saw %q", c.name, resumed, body)
			}
		}
	}

	// crypto/tls on the same port, with its own certificate and client CA.
	for _, who := range []string{"", "bob"} {
		var cfg *tls.Config
		if who == "" {
			cfg = f.tlsClient(t, "bob", tls.VersionTLS13)
			cfg.Certificates = nil
		} else {
			cfg = f.tlsClient(t, who, tls.VersionTLS13)
		}
		for _, resumed := range []bool{false, true} {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
			if err != nil {
				t.Fatalf("crypto/tls client %q: %v", who, err)
			}
			code, body, err := tryRequest(c, "localhost", "/")
			c.Close()
			if err != nil || code != 200 || !strings.HasPrefix(body, "protocol=tls1.3 ") || c.ConnectionState().DidResume != resumed ||
				strings.Contains(body, "bob.example.cn") != (who == "bob") {
				t.Errorf("crypto/tls client %q, resumed %v: %d %q %v (resumed %v)", who, resumed, code, body, err, c.ConnectionState().DidResume)
			}
		}
	}

	// A revoked SM2 client certificate is refused with certificate_revoked.
	_, _, err := getShangMi(addr, f.shangMiClient(t, "alice", "localhost"))
	wantShangMiAlert(t, "alice (revoked)", err, tls13.AlertCertificateRevoked)

	// A ShangMi-only hello for a name no site serves.
	_, _, err = getShangMi(addr, f.shangMiClient(t, "", "nobody.example.cn"))
	wantShangMiAlert(t, "unknown server name", err, tls13.AlertUnrecognizedName)

	// Bob is revoked after his ticket was issued: after a reload, which
	// reads the CRL again, the ticket does not get him in.
	mustGmgate(t, f.dir, "cert", "revoke", "--ca", "sm2-ca", "sm2-ca-certs/bob.example.cn.sign.crt")
	mustGmgate(t, f.dir, "cert", "crl", "--ca", "sm2-ca")
	reload(t, srv, 1)
	st, _, err := getShangMi(addr, bob)
	if st.DidResume && err == nil {
		t.Fatal("a ticket of a certificate revoked since resumed")
	}
	wantShangMiAlert(t, "bob's ticket after his revocation", err, tls13.AlertCertificateRevoked)
	if n := adminMetric(t, srv.admin, `gmgate_revocation_refused_total{scope="edge/gm/tls",status="revoked"}`); n < 2 {
		t.Errorf("revocation refusals counted: %v, want at least 2", n)
	}
}

package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/internal/testocsp"
	"github.com/gmgate/gmgate/internal/testopenssl"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

// stapleGateway serves, from a configuration file through Run as gmgate
// serve does, a TLS listener with a certificate file of leaf; stapling
// is the listener's tls.ocsp_stapling line ("" for the default).
func stapleGateway(t *testing.T, leaf *testocsp.Leaf, stapling string) (*Server, chan<- struct{}) {
	t.Helper()
	dir := tempDir(t)
	cert, key := filepath.Join(dir, "site.crt"), filepath.Join(dir, "site.key")
	if err := os.WriteFile(cert, leaf.ChainPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "app")
	file := filepath.Join(dir, "gmgate.yaml")
	writeConfig(t, file, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tls
    tls:
      cert: %s
      key: %s
%s
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, cert, key, stapling, up.URL))
	return runFile(t, file)
}

// TestOCSPStaplingOpenSSL: a TLS client asking for the certificate's
// status (openssl s_client -status) gets the OCSP response gmgate
// fetched from the responder its certificate file names, and none when
// stapling is off.
func TestOCSPStaplingOpenSSL(t *testing.T) {
	bin := testopenssl.Bin(t)
	ca := testocsp.New(t)
	leaf := ca.Issue(t, "staple.example.cn")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	dir := tempDir(t)
	rootFile := writePEM(t, filepath.Join(dir, "root.crt"), ca.Cert.Raw)

	s, sighup := stapleGateway(t, leaf, "")
	addr := s.Addr("edge").String()
	stapled := func() []byte {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "staple.example.cn"})
		if err != nil {
			return nil
		}
		defer c.Close()
		return c.ConnectionState().OCSPResponse
	}
	testwait.For(t, "gmgate to staple the response", func() bool { return len(stapled()) > 0 })
	asked := ca.Requests()
	out := testopenssl.Run(t, bin, dir, "s_client", "-connect", addr, "-servername", "staple.example.cn", "-status", "-CAfile", rootFile, "-verify_return_error")
	for _, want := range []string{"OCSP Response Status: successful", "Cert Status: good", "Verify return code: 0 (ok)"} {
		if !strings.Contains(out, want) {
			t.Errorf("s_client -status does not show %q:\n%s", want, out)
		}
	}
	if ca.Requests() != asked {
		t.Errorf("a handshake asked the responder (%d requests); the staple should be cached", ca.Requests()-asked)
	}

	// A reload (SIGHUP) keeps the staple of the unchanged certificate:
	// the first handshake after it has it, and the responder is not
	// asked again.
	before := s.current()
	sighup <- struct{}{}
	testwait.For(t, "the reload", func() bool { return s.current() != before })
	if len(stapled()) == 0 {
		t.Error("the first handshake after the reload has no staple")
	}
	if ca.Requests() != asked {
		t.Errorf("the reload asked the responder again (%d requests) for an unchanged certificate", ca.Requests()-asked)
	}

	t.Run("off", func(t *testing.T) {
		s, _ := stapleGateway(t, ca.Issue(t, "off.example.cn"), "      ocsp_stapling: false")
		out := testopenssl.Run(t, bin, dir, "s_client", "-connect", s.Addr("edge").String(), "-servername", "off.example.cn", "-status")
		if !strings.Contains(out, "OCSP response: no response sent") {
			t.Errorf("with ocsp_stapling: false, s_client -status shows:\n%s", out)
		}
	})
}

// tlcpStapleGateway serves, through Run as gmgate serve does, a TLCP
// listener with the pair's files.
func tlcpStapleGateway(t *testing.T, pair *testocsp.Pair, stapling string) *Server {
	t.Helper()
	dir := tempDir(t)
	files := map[string][]byte{"sign.crt": pair.SignPEM, "sign.key": pair.SignKeyPEM, "enc.crt": pair.EncPEM, "enc.key": pair.EncKeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	up := echoUpstream(t, "app")
	file := filepath.Join(dir, "gmgate.yaml")
	writeConfig(t, file, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: tlcp
    tlcp:
      sign_cert: %[1]s/sign.crt
      sign_key: %[1]s/sign.key
      enc_cert: %[1]s/enc.crt
      enc_key: %[1]s/enc.key
%[2]s
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%[3]q]}
`, dir, stapling, up.URL))
	s, _ := runFile(t, file)
	return s
}

// TestOCSPStaplingTLCP: a TLCP client that asks for the certificate
// status gets the SM2-signed OCSP response about the signing
// certificate; with tlcp.ocsp_stapling: false it gets none. Tongsuo's
// NTLS client (GMGATE_TONGSUO) shows it like OpenSSL does for TLS.
func TestOCSPStaplingTLCP(t *testing.T) {
	ca := testocsp.NewSM2(t)
	pair := ca.IssueTLCP(t, "gm.example.cn")
	roots := smx509.NewCertPool()
	roots.AddCert(ca.SM2.Cert)
	ask := func(s *Server) []byte {
		c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: roots, ServerName: "gm.example.cn", RequestOCSPStaple: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().OCSPResponse
	}

	s := tlcpStapleGateway(t, pair, "")
	testwait.For(t, "gmgate to staple the response", func() bool { return len(ask(s)) > 0 })
	if _, err := revocation.CheckStaple(ask(s), pair.Sign, ca.SM2.Cert, time.Now()); err != nil {
		t.Errorf("the stapled response does not check: %v", err)
	}

	if bin := os.Getenv("GMGATE_TONGSUO"); bin != "" {
		dir := tempDir(t)
		caFile := writePEM(t, filepath.Join(dir, "ca.crt"), ca.SM2.Cert.Raw)
		out := testopenssl.Run(t, bin, dir, "s_client", "-connect", s.Addr("edge").String(), "-enable_ntls", "-ntls", "-status", "-CAfile", caFile)
		for _, want := range []string{"OCSP Response Status: successful", "Cert Status: good"} {
			if !strings.Contains(out, want) {
				t.Errorf("Tongsuo s_client -ntls -status does not show %q:\n%s", want, out)
			}
		}
	}

	off := tlcpStapleGateway(t, ca.IssueTLCP(t, "gm.example.cn"), "      ocsp_stapling: false")
	if got := ask(off); got != nil {
		t.Errorf("with tlcp.ocsp_stapling: false a response of %d bytes was stapled", len(got))
	}
}

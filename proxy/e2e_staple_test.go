package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testocsp"
	"github.com/gmgate/gmgate/internal/testopenssl"
	"github.com/gmgate/gmgate/internal/testwait"
)

// stapleGateway serves, from a configuration file through Run as gmgate
// serve does, a TLS listener with a certificate file of leaf; stapling
// is the listener's tls.ocsp_stapling line ("" for the default).
func stapleGateway(t *testing.T, leaf *testocsp.Leaf, stapling string) *Server {
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
	s, _ := runFile(t, file)
	return s
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

	s := stapleGateway(t, leaf, "")
	addr := s.Addr("edge").String()
	testwait.For(t, "gmgate to staple the response", func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "staple.example.cn"})
		if err != nil {
			return false
		}
		defer c.Close()
		return len(c.ConnectionState().OCSPResponse) > 0
	})
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

	t.Run("off", func(t *testing.T) {
		s := stapleGateway(t, ca.Issue(t, "off.example.cn"), "      ocsp_stapling: false")
		out := testopenssl.Run(t, bin, dir, "s_client", "-connect", s.Addr("edge").String(), "-servername", "off.example.cn", "-status")
		if !strings.Contains(out, "OCSP response: no response sent") {
			t.Errorf("with ocsp_stapling: false, s_client -status shows:\n%s", out)
		}
	})
}

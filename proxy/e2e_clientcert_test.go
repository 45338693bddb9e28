package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// forgedCertHeaders are RFC 9440 and certificate-description headers a
// client writes to pass for another.
var forgedCertHeaders = []string{
	"Client-Cert: :TUlJQg==:",
	"client_cert_chain: :TUlJQg==:",
	"X-TLCP-Client-Enc-Cert: :TUlJQg==:",
	"X-Client-Issuer: CN=forged CA",
	"X_Client_SANs: \"DNS:admin\"",
}

// certHeaderNames are the session headers of TestClientCertHeaders.
var certHeaderNames = []string{"Client-Cert", "Client-Cert-Chain", "X-Tlcp-Client-Enc-Cert", "X-Client-Issuer", "X-Client-Sans", "X-Client-Serial", "X-Client-Fingerprint"}

// certRequest sends GET / with the forged certificate headers on c and
// returns the certificate headers the upstream received.
func certRequest(c net.Conn) (http.Header, error) {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: localhost\r\n" + strings.Join(forgedCertHeaders, "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e echoed
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: %v", resp.Status, err)
	}
	got := http.Header{}
	for k, v := range e.Headers {
		for _, n := range append(certHeaderNames, "X-Tlcp-Client-Verified") {
			if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), n) {
				got[k] = v
			}
		}
	}
	return got, nil
}

// wantSeq checks that value is the RFC 8941 list of byte sequences of
// ders.
func wantSeq(t *testing.T, name, value string, ders ...[]byte) {
	t.Helper()
	var items []string
	for _, d := range ders {
		items = append(items, ":"+base64.StdEncoding.EncodeToString(d)+":")
	}
	if want := strings.Join(items, ", "); value != want {
		t.Errorf("%s = %.60q..., want %.60q...", name, value, want)
	}
}

// TestClientCertHeaders: through gmgate serve, a site whose
// session_headers name the RFC 9440 headers hands its upstream the
// verified client's certificate, chain, encryption certificate (TLCP),
// issuer, names, serial and fingerprint, over TLCP and over TLS; a
// client without a certificate gets none of them, and what it forged
// under those names is gone.
func TestClientCertHeaders(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app")
	dir := tempDir(t)

	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256, Subject: pkix.Name{CommonName: "TLS client CA"}})
	if err != nil {
		t.Fatal(err)
	}
	spiffe, _ := url.Parse("spiffe://example.cn/teller")
	tlsLeaf, err := tlsCA.IssueTLS(pki.IssueOptions{Subject: pkix.Name{CommonName: "tls-teller"}, EmailAddresses: []string{"teller@example.cn"}, URIs: []*url.URL{spiffe}})
	if err != nil {
		t.Fatal(err)
	}
	tlsClientCert, err := tlsLeaf.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	tlsCAFile := writePEM(t, filepath.Join(dir, "tls-clients.crt"), tlsCA.Root.Raw)
	dual, err := p.ca.IssueDual(pki.IssueOptions{Subject: pkix.Name{CommonName: "teller-9"}, DNSNames: []string{"teller9.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(dir, "gmgate.yaml")
	writeConfig(t, file, fmt.Sprintf(`admin: {listen: "off"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    protocol: auto
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
      client_auth: verify_if_given
      client_ca: %s
    tls:
      cert: %s
      key: %s
      client_auth: verify_if_given
      client_ca: %s
    session_headers:
      client_cert: Client-Cert
      client_cert_chain: Client-Cert-Chain
      client_enc_cert: X-TLCP-Client-Enc-Cert
      client_issuer: X-Client-Issuer
      client_sans: X-Client-SANs
      client_serial: X-Client-Serial
      client_fingerprint: X-Client-Fingerprint
    routes: [{upstream: app}]
upstreams:
  app: {targets: [%q]}
`, p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey, p.dual.CACert, p.tlsCert, p.tlsKey, tlsCAFile, up.URL))
	s, _ := runFile(t, file)
	addr := s.Addr("edge").String()

	t.Run("tlcp verified", func(t *testing.T) {
		c, err := tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{*dual.Certificate()}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h, err := certRequest(c)
		if err != nil {
			t.Fatal(err)
		}
		wantSeq(t, "Client-Cert", h.Get("Client-Cert"), dual.SignCert.Raw)
		wantSeq(t, "Client-Cert-Chain", h.Get("Client-Cert-Chain"), p.ca.Root.Raw)
		wantSeq(t, "X-TLCP-Client-Enc-Cert", h.Get("X-Tlcp-Client-Enc-Cert"), dual.EncCert.Raw)
		if got, want := h.Get("X-Client-Issuer"), p.ca.Root.Subject.String(); got != want {
			t.Errorf("issuer %q, want %q", got, want)
		}
		if got := h.Get("X-Client-Sans"); got != `"DNS:teller9.example.cn"` {
			t.Errorf("SANs %q", got)
		}
		if got, want := h.Get("X-Client-Serial"), strings.ToUpper(dual.SignCert.SerialNumber.Text(16)); got != want {
			t.Errorf("serial %q, want %q", got, want)
		}
		if len(h["Client-Cert"]) != 1 || len(h["X-Client-Issuer"]) != 1 || len(h) != len(certHeaderNames)+1 {
			t.Errorf("the forged headers were not replaced: %v", h)
		}
	})

	t.Run("tls verified", func(t *testing.T) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", Certificates: []tls.Certificate{*tlsClientCert}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h, err := certRequest(c)
		if err != nil {
			t.Fatal(err)
		}
		wantSeq(t, "Client-Cert", h.Get("Client-Cert"), tlsLeaf.Cert.Raw)
		wantSeq(t, "Client-Cert-Chain", h.Get("Client-Cert-Chain"), tlsCA.Root.Raw)
		if got := h.Get("X-Tlcp-Client-Enc-Cert"); got != "" {
			t.Errorf("a TLS client has no encryption certificate, got %q", got)
		}
		if got, want := h.Get("X-Client-Sans"), `"email:teller@example.cn", "URI:spiffe://example.cn/teller"`; got != want {
			t.Errorf("SANs %q, want %q", got, want)
		}
		if got := h.Get("X-Client-Issuer"); got != "CN=TLS client CA" {
			t.Errorf("issuer %q", got)
		}
	})

	for name, dial := range map[string]func() (net.Conn, error){
		"tlcp without certificate": func() (net.Conn, error) {
			return tlcp.Dial("tcp", addr, &tlcp.Config{RootCAs: p.roots, ServerName: "localhost"})
		},
		"tls without certificate": func() (net.Conn, error) {
			return tls.Dial("tcp", addr, &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h, err := certRequest(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 1 || h.Get("X-Tlcp-Client-Verified") != "false" {
				t.Errorf("an unverified client's request reached the upstream with %v", h)
			}
		})
	}
}

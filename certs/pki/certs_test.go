package pki

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/tlcp"
)

func TestMain(m *testing.M) {
	// Encrypted keys in tests need not resist brute force.
	pemfile.KeyEncryptionIterations = 1024
	os.Exit(m.Run())
}

// newTestCA makes an SM2 CA for a test.
func newTestCA(t testing.TB, intermediate bool) *CA {
	t.Helper()
	ca, err := NewCA(CAOptions{Intermediate: intermediate})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeTestPair issues a pair for names and writes it to dir.
func writeTestPair(t testing.TB, ca *CA, dir, name string, password []byte, dns ...string) DualFiles {
	t.Helper()
	d, err := ca.IssueDual(IssueOptions{DNSNames: dns, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Write(dir, name, withPassword(password))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// withPassword encrypts keys with password in the default format (nil
// for none).
func withPassword(password []byte) *KeyEncryption {
	if password == nil {
		return nil
	}
	return &KeyEncryption{Password: password}
}

// handshakeTLCP serves cert on a loopback listener and connects a tlcp
// client that trusts roots and checks serverName; it returns the server's
// certificates as the client saw them.
func handshakeTLCP(t testing.TB, serverConfig *tlcp.Config, roots *smx509.CertPool, serverName string) ([]*smx509.Certificate, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		sc := tlcp.Server(c, serverConfig)
		if err := sc.HandshakeContext(context.Background()); err != nil {
			serverErr <- err
			return
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(sc, buf); err != nil {
			serverErr <- err
			return
		}
		_, err = sc.Write(buf)
		serverErr <- err
	}()
	conn, err := tlcp.Dial("tcp", ln.Addr().String(), &tlcp.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		<-serverErr
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		return nil, err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, err
	}
	if string(buf) != "hello" {
		t.Fatalf("echo = %q", buf)
	}
	if err := <-serverErr; err != nil {
		return nil, err
	}
	return conn.ConnectionState().PeerCertificates, nil
}

func TestIssueDualShape(t *testing.T) {
	for _, intermediate := range []bool{false, true} {
		ca := newTestCA(t, intermediate)
		d, err := ca.IssueDual(IssueOptions{DNSNames: []string{"a.example.cn", "b.example.cn"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")}, Validity: 3653 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s, e := d.SignCert, d.EncCert
		if !bytes.Equal(s.RawSubject, e.RawSubject) || !bytes.Equal(s.RawIssuer, e.RawIssuer) {
			t.Error("subject or issuer differ between sign and enc")
		}
		if s.Subject.CommonName != "a.example.cn" {
			t.Errorf("CN = %q", s.Subject.CommonName)
		}
		if !bytes.Equal(extension(s, "2.5.29.17"), extension(e, "2.5.29.17")) || extension(s, "2.5.29.17") == nil {
			t.Error("SAN extensions differ or are missing")
		}
		for _, c := range []*smx509.Certificate{s, e} {
			if extension(c, "2.5.29.19") != nil {
				t.Error("end-entity certificate carries a BasicConstraints extension")
			}
			if n := len(c.SerialNumber.Bytes()); n < 4 {
				t.Errorf("serial is %d bytes", n)
			}
			if days := c.NotAfter.Sub(c.NotBefore).Hours() / 24; days > 3653 {
				t.Errorf("validity %v days", days)
			}
			if !certinfo.HasEKU(c, smx509.ExtKeyUsageServerAuth) || !certinfo.HasEKU(c, smx509.ExtKeyUsageClientAuth) {
				t.Errorf("EKU = %v", c.ExtKeyUsage)
			}
			pool := smx509.NewCertPool()
			for _, ch := range d.Chain {
				pool.AddCert(ch)
			}
			if _, err := c.Verify(smx509.VerifyOptions{Roots: ca.Pool(), Intermediates: pool, DNSName: "b.example.cn"}); err != nil {
				t.Errorf("verify: %v", err)
			}
		}
		if s.KeyUsage != smx509.KeyUsageDigitalSignature|smx509.KeyUsageContentCommitment {
			t.Errorf("sign KU = %s", certinfo.KeyUsageString(s.KeyUsage))
		}
		if e.KeyUsage != smx509.KeyUsageKeyEncipherment|smx509.KeyUsageDataEncipherment|smx509.KeyUsageKeyAgreement {
			t.Errorf("enc KU = %s", certinfo.KeyUsageString(e.KeyUsage))
		}
		if s.SerialNumber.Cmp(e.SerialNumber) == 0 {
			t.Error("sign and enc share a serial")
		}
	}
}

func extension(c *smx509.Certificate, oid string) []byte {
	for _, e := range c.Extensions {
		if e.Id.String() == oid {
			return e.Value
		}
	}
	return nil
}

func TestIssueRejectsTooLongValidity(t *testing.T) {
	ca := newTestCA(t, false)
	_, err := ca.IssueDual(IssueOptions{DNSNames: []string{"x.cn"}, Validity: 3654 * 24 * time.Hour})
	if err == nil || !strings.Contains(err.Error(), "longer than 3653 days") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ca.IssueDual(IssueOptions{}); err == nil || !strings.Contains(err.Error(), "--dns") {
		t.Fatalf("no names: err = %v", err)
	}
}

func TestWriteLoadServe(t *testing.T) {
	for _, tc := range []struct {
		name         string
		intermediate bool
		password     []byte
	}{{"plain", false, nil}, {"intermediate", true, nil}, {"encrypted", false, []byte("s3cret pw")}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := newTestCA(t, tc.intermediate)
			if err := ca.Write(filepath.Join(dir, "ca"), withPassword(tc.password)); err != nil {
				t.Fatal(err)
			}
			opts := LoadCAOptions{}
			signRef, encRef := "", ""
			f := DualFileNames(filepath.Join(dir, "out"), "site")
			if tc.password != nil {
				pwFile := filepath.Join(dir, "pw")
				os.WriteFile(pwFile, append(tc.password, '\n'), 0o600)
				opts.KeyPasswordFile = pwFile
				signRef = "file:" + f.SignKey + "?password-file=" + pwFile
				encRef = "file:" + f.EncKey + "?password-file=" + pwFile
			} else {
				signRef, encRef = f.SignKey, f.EncKey
			}
			loaded, err := LoadCAWithOptions(filepath.Join(dir, "ca"), opts)
			if err != nil {
				t.Fatal(err)
			}
			if !loaded.Root.Equal(ca.Root) {
				t.Fatal("loaded a different root")
			}
			got := writeTestPair(t, loaded, filepath.Join(dir, "out"), "site", tc.password, "site.example.cn")
			if got != f {
				t.Fatalf("files = %+v, want %+v", got, f)
			}
			for _, k := range []string{f.SignKey, f.EncKey} {
				st, err := os.Stat(k)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o600 {
					t.Errorf("%s mode %v", k, st.Mode())
				}
				data, _ := os.ReadFile(k)
				wantType := "PRIVATE KEY"
				if tc.password != nil {
					wantType = "ENCRYPTED PRIVATE KEY"
				}
				if b, _ := pem.Decode(data); b == nil || b.Type != wantType {
					t.Errorf("%s is not a %s PEM", k, wantType)
				}
			}
			cert, err := certs.LoadTLCP(f.SignCert, signRef, f.EncCert, encRef)
			if err != nil {
				t.Fatal(err)
			}
			wantLen := 1
			if tc.intermediate {
				wantLen = 2
			}
			if len(cert.SignCertificate) != wantLen || len(cert.EncCertificate) != wantLen {
				t.Fatalf("chain lengths %d/%d", len(cert.SignCertificate), len(cert.EncCertificate))
			}
			roots, err := pemfile.ReadCertificates(f.CACert)
			if err != nil {
				t.Fatal(err)
			}
			pool := smx509.NewCertPool()
			pool.AddCert(roots[0])
			peer, err := handshakeTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}}, pool, "site.example.cn")
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if !bytes.Equal(peer[0].Raw, cert.SignCertificate[0]) || !bytes.Equal(peer[1].Raw, cert.EncCertificate[0]) {
				t.Error("the client saw other certificates than those loaded")
			}
		})
	}
}

func TestIssueTLS(t *testing.T) {
	ca, err := NewCA(CAOptions{KeyAlgorithm: KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueTLS(IssueOptions{DNSNames: []string{"tls.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf, kf, err := leaf.Write(dir, "tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := certs.LoadTLS(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	root, _ := x509.ParseCertificate(ca.Root.Raw)
	pool.AddCert(root)
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "tls.example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := newTestCA(t, false).IssueTLS(IssueOptions{DNSNames: []string{"x.com"}}); err == nil || !strings.Contains(err.Error(), "ECDSA or RSA CA") {
		t.Fatalf("SM2 CA issuing TLS: err = %v", err)
	}
}

// wantAll fails the test for each part that msg does not contain.
func wantAll(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error %q\n  does not contain %q", msg, p)
		}
	}
}

// files are the TLCP files of a written pair.
func files(d DualFiles) certs.TLCPFiles {
	return certs.TLCPFiles{SignCert: d.SignCert, SignKey: d.SignKey, EncCert: d.EncCert, EncKey: d.EncKey}
}

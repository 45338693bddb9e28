package tlcp

// Interoperability with github.com/tjfoc/gmsm/gmtls, an independent TLCP
// implementation, in both directions (suite 0xE013, the only one it has).
// Its quirks (protocol facts, section 14) are configured around here: one
// certificate per key pair, unencrypted PKCS#8 keys, no session tickets,
// no CA certificate in the server's list.

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	tjtls "github.com/tjfoc/gmsm/gmtls"
	tjx509 "github.com/tjfoc/gmsm/x509"
)

// tjfocPair turns one of our key pairs into a gmtls certificate.
func tjfocPair(tb testing.TB, certDER []byte, key any) tjtls.Certificate {
	tb.Helper()
	keyDER, err := smx509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := tjtls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func tjfocRoots(t *testing.T) *tjx509.CertPool {
	t.Helper()
	ca, err := tjx509.ParseCertificate(getPKI(t).ca.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	pool := tjx509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

// tjfocClientConfig is a gmtls client that trusts our test CA and speaks
// the one suite gmtls has.
func tjfocClientConfig(t *testing.T) *tjtls.Config {
	return &tjtls.Config{
		GMSupport:    tjtls.NewGMSupport(),
		RootCAs:      tjfocRoots(t),
		ServerName:   "server.test",
		CipherSuites: []uint16{tjtls.GMTLS_SM2_WITH_SM4_SM3},
	}
}

// tjfocServerConfig is a gmtls server with our test server's pair.
func tjfocServerConfig(t testing.TB) *tjtls.Config {
	p := getPKI(t)
	return &tjtls.Config{
		GMSupport: tjtls.NewGMSupport(),
		// gmtls takes the signing and the encryption certificate as two
		// certificates, in that order.
		Certificates: []tjtls.Certificate{
			tjfocPair(t, p.server.SignCertificate[0], p.server.SignKey),
			tjfocPair(t, p.server.EncCertificate[0], p.server.EncKey),
		},
		CipherSuites:           []uint16{tjtls.GMTLS_SM2_WITH_SM4_SM3},
		SessionTicketsDisabled: true,
	}
}

// listenCBC is our server with scfg, ECC_SM4_CBC_SM3 only (the suite
// gmtls speaks), on a loopback port until the test ends.
func listenCBC(t *testing.T, scfg *Config) net.Listener {
	t.Helper()
	scfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
	l, err := Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// echoUpper answers one request of n bytes with its upper-case form.
func echoUpper(c net.Conn, n int) error {
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	_, err := c.Write(bytes.ToUpper(buf))
	return err
}

// checkUpperEcho sends msg and checks that echoUpper's answer comes back.
func checkUpperEcho(t *testing.T, conn io.ReadWriter, msg string) {
	t.Helper()
	if _, err := conn.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != strings.ToUpper(msg) {
		t.Fatalf("got %q", got)
	}
}

func TestInteropTjfocClient(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "server-auth"
		if auth {
			name = "mutual-auth"
		}
		t.Run(name, func(t *testing.T) {
			p := getPKI(t)
			scfg := serverConfig(t)
			if auth {
				scfg.ClientAuth = RequireAndVerifyClientCert
			}
			l := listenCBC(t, scfg)
			var state ConnectionState // set before done receives
			done := serveOne(l, func(c net.Conn) error {
				err := echoUpper(c, len("request from tjfoc"))
				state = c.(*Conn).ConnectionState()
				return err
			})

			ccfg := tjfocClientConfig(t)
			if auth {
				sign := tjfocPair(t, p.client.SignCertificate[0], p.client.SignKey)
				ccfg.GetClientCertificate = func(*tjtls.CertificateRequestInfo) (*tjtls.Certificate, error) {
					// Sign and enc certificates, signed with the sign key.
					return &tjtls.Certificate{
						Certificate: [][]byte{p.client.SignCertificate[0], p.client.EncCertificate[0]},
						PrivateKey:  sign.PrivateKey,
					}, nil
				}
			}
			conn, err := tjtls.Dial("tcp", l.Addr().String(), ccfg)
			if err != nil {
				t.Fatalf("tjfoc client: %v", err)
			}
			defer conn.Close()
			checkUpperEcho(t, conn, "request from tjfoc")
			if err := <-done; err != nil {
				t.Fatalf("our server: %v", err)
			}
			if state.CipherSuite != ECC_SM4_CBC_SM3 {
				t.Fatalf("suite %s", CipherSuiteName(state.CipherSuite))
			}
			if auth {
				if len(state.PeerCertificates) != 2 || len(state.VerifiedChains) == 0 {
					t.Fatalf("server saw %d client certificates, %d chains", len(state.PeerCertificates), len(state.VerifiedChains))
				}
				if state.PeerCertificates[0].Subject.CommonName != "client.test" {
					t.Fatalf("client subject %v", state.PeerCertificates[0].Subject)
				}
			}
		})
	}
}

func TestInteropTjfocServer(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "server-auth"
		if auth {
			name = "mutual-auth"
		}
		t.Run(name, func(t *testing.T) {
			p := getPKI(t)
			scfg := tjfocServerConfig(t)
			if auth {
				scfg.ClientAuth = tjtls.RequireAndVerifyClientCert
				scfg.ClientCAs = tjfocRoots(t)
			}
			l, err := tjtls.Listen("tcp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := serveOne(l, func(c net.Conn) error { return echoUpper(c, len("request from gmgate")) })

			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
			if auth {
				ccfg.Certificates = []Certificate{p.client}
			}
			conn, err := DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(), ccfg)
			if err != nil {
				t.Fatalf("our client: %v", err)
			}
			defer conn.Close()
			checkUpperEcho(t, conn, "request from gmgate")
			if err := <-done; err != nil {
				t.Fatalf("tjfoc server: %v", err)
			}
			if st := conn.ConnectionState(); st.CipherSuite != ECC_SM4_CBC_SM3 || len(st.VerifiedChains) == 0 {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

// TestInteropTjfocRejectsWrongCA checks that the independent client refuses
// our server when it does not trust the CA: the failure is real, not a
// side effect of the test setup.
func TestInteropTjfocRejectsWrongCA(t *testing.T) {
	l := listenCBC(t, serverConfig(t))
	serverErr := serveOne(l, func(c net.Conn) error { return c.(*Conn).Handshake() })
	other, err := tjx509.ParseCertificate(getPKI(t).otherCA.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	pool := tjx509.NewCertPool()
	pool.AddCert(other)
	_, err = tjtls.Dial("tcp", l.Addr().String(), &tjtls.Config{
		GMSupport: tjtls.NewGMSupport(), RootCAs: pool, ServerName: "server.test",
		CipherSuites: []uint16{tjtls.GMTLS_SM2_WITH_SM4_SM3},
	})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("tjfoc client accepted a server from an untrusted CA: %v", err)
	}
	var ae *AlertError
	if err := <-serverErr; !errors.As(err, &ae) || !ae.Remote || ae.Alert != AlertBadCertificate {
		t.Fatalf("our server got %v, want the client's bad_certificate alert", err)
	}
}

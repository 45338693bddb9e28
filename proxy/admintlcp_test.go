package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// The admin listener that speaks TLS and TLCP hands out each connection
// in the protocol of its first record, while a silent client waits
// without holding up the others; garbage and plain HTTP are closed.
func TestAdminAutoListener(t *testing.T) {
	smCA, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loopback := pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	pair, err := smCA.IssueDual(loopback)
	if err != nil {
		t.Fatal(err)
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsCA.IssueTLS(loopback)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newAdminAutoListener(inner,
		&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}},
		&tlcp.Config{Certificates: []tlcp.Certificate{*pair.Certificate()}})
	defer l.Close()
	addr := inner.Addr().String()

	// A server that answers one byte on each connection it accepts.
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil {
					_, _ = c.Write(b)
				}
			}()
		}
	}()
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	roundTrip := func(c net.Conn) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
			t.Fatalf("echo: %q %v", b, err)
		}
	}
	tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: tlsRoots(t, tlsCA)})
	if err != nil {
		t.Fatalf("TLS: %v", err)
	}
	roundTrip(tc)
	tc.Close()
	if _, ok := (<-accepted).(*tls.Conn); !ok {
		t.Error("a TLS client was not handed out as a *tls.Conn")
	}
	gc, err := (&tlcp.Dialer{Config: &tlcp.Config{RootCAs: smCA.Pool(), ServerName: "127.0.0.1"}}).Dial("tcp", addr)
	if err != nil {
		t.Fatalf("TLCP: %v", err)
	}
	roundTrip(gc)
	gc.Close()
	if _, ok := (<-accepted).(*tlcp.Conn); !ok {
		t.Error("a TLCP client was not handed out as a *tlcp.Conn")
	}
	for _, first := range []string{"GET / HTTP/1.1\r\n\r\n", "\x17\x03\x03\x00\x05hello"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(first))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ne net.Error
		if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("%q: read %d bytes, %v; want the connection closed", first, n, err)
		}
		c.Close()
	}
	l.Close()
	if _, ok := <-accepted; ok {
		t.Error("Accept handed out a connection after Close")
	}
	// Close let go of the silent client too.
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ne net.Error
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("the silent client after Close: read %d bytes, %v; want the connection closed", n, err)
	}
}

func tlsRoots(t *testing.T, ca *pki.CA) *x509.CertPool {
	t.Helper()
	root, err := x509.ParseCertificate(ca.Root.Raw)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return pool
}

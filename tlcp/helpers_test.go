package tlcp

import (
	"crypto"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/internal/testpki"
)

// testPKI is a CA with server and client identities, made once per test
// binary.
type testPKI struct {
	ca      *testpki.CA
	roots   *smx509.CertPool
	server  Certificate
	client  Certificate
	other   *smx509.CertPool // a pool with an unrelated CA
	otherCA *testpki.CA
}

var pkiCache atomic.Pointer[testPKI]

func getPKI(t testing.TB) *testPKI {
	if p := pkiCache.Load(); p != nil {
		return p
	}
	p := &testPKI{}
	p.ca = testpki.NewCA(t, "gmgate test CA")
	p.roots = p.ca.Roots
	p.server = issueDual(t, p.ca, "server.test", []string{"server.test", "localhost"}, nil)
	p.client = issueDual(t, p.ca, "client.test", nil, nil)
	p.otherCA = testpki.NewCA(t, "unrelated CA")
	p.other = p.otherCA.Roots
	pkiCache.Store(p)
	return p
}

// issueDual issues a certificate pair from ca for cn and dns, also valid
// for 127.0.0.1 and with the organization gmgate; adjust, if not nil,
// changes the templates before they are signed.
func issueDual(t testing.TB, ca *testpki.CA, cn string, dns []string, adjust testpki.Adjust) Certificate {
	t.Helper()
	d := ca.IssueDual(t, cn, dns, func(sign, enc *smx509.Certificate) {
		for _, c := range []*smx509.Certificate{sign, enc} {
			c.Subject.Organization = []string{"gmgate"}
			c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		if adjust != nil {
			adjust(sign, enc)
		}
	})
	return Certificate{
		SignCertificate: [][]byte{d.SignCert},
		SignKey:         d.SignKey,
		EncCertificate:  [][]byte{d.EncCert},
		EncKey:          d.EncKey,
	}
}

// countingKey wraps an SM2 key and counts its private-key operations.
type countingKey struct {
	k        *sm2.PrivateKey
	signs    atomic.Int64
	decrypts atomic.Int64
	ecdhs    atomic.Int64
}

func (c *countingKey) Public() crypto.PublicKey { return c.k.Public() }

func (c *countingKey) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	c.signs.Add(1)
	return c.k.Sign(r, msg, opts)
}

func (c *countingKey) Decrypt(r io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	c.decrypts.Add(1)
	return c.k.Decrypt(r, msg, opts)
}

func (c *countingKey) ECDH() (*ecdh.PrivateKey, error) {
	c.ecdhs.Add(1)
	return c.k.ECDH()
}

func (c *countingKey) ops() int64 { return c.signs.Load() + c.decrypts.Load() + c.ecdhs.Load() }

// countingCert returns a copy of cert whose keys count their operations.
func countingCert(cert Certificate) (Certificate, *countingKey, *countingKey) {
	sk := &countingKey{k: cert.SignKey.(*sm2.PrivateKey)}
	ek := &countingKey{k: cert.EncKey.(*sm2.PrivateKey)}
	cert.SignKey, cert.EncKey = sk, ek
	return cert, sk, ek
}

func serverConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{Certificates: []Certificate{p.server}, ClientCAs: p.roots}
}

func clientConfig(t testing.TB) *Config {
	p := getPKI(t)
	return &Config{RootCAs: p.roots, ServerName: "server.test"}
}

// serveOne accepts one connection on l and runs serve on it, under a 10 s
// deadline, then closes it. The channel receives serve's result, or the
// error of Accept.
func serveOne(l net.Listener, serve func(net.Conn) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		done <- serve(c)
	}()
	return done
}

// handshakeBoth runs the handshakes of client and server, failing the test
// if either fails.
func handshakeBoth(t testing.TB, client, server *Conn) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	cerr := client.Handshake()
	if serr := <-errc; cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
}

package revocation

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	mathbig "math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
	"go.uber.org/goleak"
)

// loopbackPair returns the two ends of a TCP connection on loopback
// (kernel-buffered, so that both ends may close at once).
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	deadline := time.Now().Add(20 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)
	return client, server
}

// handshake runs a client and a server handshake over a connection and
// returns their errors; the server then writes a byte the client reads,
// so that a TLS 1.3 client takes in its session ticket.
func handshake(client, server interface {
	Handshake() error
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Close() error
}) (cerr, serr error) {
	done, clientDone := make(chan error, 1), make(chan struct{})
	go func() {
		err := server.Handshake()
		if err == nil {
			_, err = server.Write([]byte{1})
		}
		done <- err
		<-clientDone
		server.Close()
	}()
	cerr = client.Handshake()
	if cerr == nil {
		_, cerr = client.Read(make([]byte, 1))
	}
	close(clientDone)
	serr = <-done
	client.Close()
	return cerr, serr
}

// crlFile writes CRLs to one file the checker reads.
type crlFile struct {
	path   string
	ca     *testCA
	number int64
}

func (f *crlFile) write(t *testing.T, chk *Checker, serials ...*smx509.Certificate) {
	t.Helper()
	f.number++
	now := time.Now()
	var revoked []*mathbig.Int
	for _, c := range serials {
		revoked = append(revoked, c.SerialNumber)
	}
	der := f.ca.crl(t, f.number, now.Add(-time.Minute), now.Add(time.Hour), revoked...)
	if err := os.WriteFile(f.path, der, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chk.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A TLCP server whose VerifyConnection calls Verify refuses a client
// certificate revoked after its session was made, on the resumed
// handshake: the session's chains are checked again.
func TestRevokedRefusedOnResumedTLCPHandshake(t *testing.T) {
	ca := testpki.NewCA(t, "revocation handshake CA")
	tca := &testCA{cert: ca.Cert, key: ca.Key}
	pair := func(cn string) tlcp.Certificate {
		d := ca.IssueDual(t, cn, []string{cn}, nil)
		return tlcp.Certificate{SignCertificate: [][]byte{d.SignCert}, SignKey: d.SignKey, EncCertificate: [][]byte{d.EncCert}, EncKey: d.EncKey}
	}
	server, client := pair("server.test"), pair("client.test")
	clientLeaf, _ := smx509.ParseCertificate(client.SignCertificate[0])
	f := &crlFile{path: filepath.Join(t.TempDir(), "ca.crl"), ca: tca}
	chk, err := New(Options{CRL: &CRLOptions{Sources: []string{f.path}, Issuers: []*smx509.Certificate{ca.Cert}}})
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, chk)
	var resumed atomic.Bool
	scfg := &tlcp.Config{Certificates: []tlcp.Certificate{server}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Roots,
		SessionCache: tlcp.NewLRUSessionCache(8, time.Hour),
		VerifyConnection: func(cs tlcp.ConnectionState) error {
			resumed.Store(cs.DidResume)
			return chk.VerifyTLCP(context.Background(), cs.PeerCertificates, cs.VerifiedChains)
		}}
	ccfg := &tlcp.Config{Certificates: []tlcp.Certificate{client}, RootCAs: ca.Roots, ServerName: "server.test",
		ClientSessionCache: tlcp.NewLRUClientSessionCache(8, 0)}
	connect := func() (error, error) {
		c, s := loopbackPair(t)
		return handshake(tlcp.Client(c, ccfg), tlcp.Server(s, scfg))
	}
	if cerr, serr := connect(); cerr != nil || serr != nil || resumed.Load() {
		t.Fatalf("full handshake: client %v, server %v, resumed %v", cerr, serr, resumed.Load())
	}
	if cerr, serr := connect(); cerr != nil || serr != nil || !resumed.Load() {
		t.Fatalf("resumed handshake: client %v, server %v, resumed %v", cerr, serr, resumed.Load())
	}
	f.write(t, chk, clientLeaf)
	_, serr := connect()
	var re *Error
	if !errors.As(serr, &re) || !re.Revoked() || !resumed.Load() {
		t.Fatalf("resumed handshake after the revocation: server %v (resumed %v), want refused as revoked", serr, resumed.Load())
	}
	if _, serr := connect(); !errors.As(serr, &re) || !re.Revoked() || resumed.Load() {
		t.Fatalf("full handshake after the revocation: server %v (resumed %v), want refused as revoked", serr, resumed.Load())
	}

	// Revoking the encryption certificate alone refuses the client too.
	encLeaf, _ := smx509.ParseCertificate(client.EncCertificate[0])
	f.write(t, chk)
	if cerr, serr := connect(); cerr != nil || serr != nil {
		t.Fatalf("after the CRL no longer lists it: client %v, server %v", cerr, serr)
	}
	f.write(t, chk, encLeaf)
	if _, serr := connect(); !errors.As(serr, &re) || !re.Revoked() || re.Result.Serial.Cmp(encLeaf.SerialNumber) != 0 {
		t.Fatalf("encryption certificate revoked: server %v, want refused as revoked", serr)
	}
}

// The same with crypto/tls, TLS 1.2 and 1.3, and an ECDSA CA: the
// checker refuses the revoked certificate on the resumed handshake and
// on the full one.
func TestRevokedRefusedOnResumedTLSHandshake(t *testing.T) {
	tca := newCA(t, "ecdsa")
	xca, _ := x509.ParseCertificate(tca.cert.Raw)
	pool := x509.NewCertPool()
	pool.AddCert(xca)
	tlsCert := func(cn string) (tls.Certificate, *smx509.Certificate) {
		key := tca.newKey(t)
		tmpl := testpki.Template(cn, []string{cn}, false)
		leaf := sign(t, tmpl, tca.cert, key.Public(), tca.key)
		return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key.(*ecdsa.PrivateKey)}, leaf
	}
	server, _ := tlsCert("server.test")
	client, clientLeaf := tlsCert("client.test")
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			f := &crlFile{path: filepath.Join(t.TempDir(), "ca.crl"), ca: tca}
			chk, err := New(Options{CRL: &CRLOptions{Sources: []string{f.path}, Issuers: []*smx509.Certificate{tca.cert}}})
			if err != nil {
				t.Fatal(err)
			}
			f.write(t, chk)
			var resumed atomic.Bool
			scfg := &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
				MaxVersion: version,
				VerifyConnection: func(cs tls.ConnectionState) error {
					resumed.Store(cs.DidResume)
					return chk.VerifyX509(context.Background(), cs.VerifiedChains)
				}}
			ccfg := &tls.Config{Certificates: []tls.Certificate{client}, RootCAs: pool, ServerName: "server.test", MaxVersion: version,
				ClientSessionCache: tls.NewLRUClientSessionCache(8)}
			connect := func() (error, error) {
				c, s := loopbackPair(t)
				return handshake(tls.Client(c, ccfg), tls.Server(s, scfg))
			}
			if cerr, serr := connect(); cerr != nil || serr != nil || resumed.Load() {
				t.Fatalf("full handshake: client %v, server %v, resumed %v", cerr, serr, resumed.Load())
			}
			if cerr, serr := connect(); cerr != nil || serr != nil || !resumed.Load() {
				t.Fatalf("resumed handshake: client %v, server %v, resumed %v", cerr, serr, resumed.Load())
			}
			f.write(t, chk, clientLeaf)
			var re *Error
			if _, serr := connect(); !errors.As(serr, &re) || !re.Revoked() || !resumed.Load() {
				t.Fatalf("resumed handshake after the revocation: server %v (resumed %v), want refused as revoked", serr, resumed.Load())
			}
		})
	}
}

// A checker that fetched CRLs and OCSP answers over HTTP, and ran its
// refresh loop, leaves no goroutine behind once Run returned and Close
// let go of its connections.
func TestRevocationCheckerLeavesNoGoroutine(t *testing.T) {
	ca := newCA(t, "sm2")
	resp := newResponder(t, ca)
	crlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(ca.crl(t, 1, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)))
	}))
	defer crlSrv.Close()
	leaf := ca.client(t, "c", resp.srv.URL)
	resp.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: time.Now(), nextUpdate: time.Now().Add(time.Hour)})
	ignore := goleak.IgnoreCurrent()

	chk, err := New(Options{CRL: &CRLOptions{Sources: []string{crlSrv.URL}, Issuers: []*smx509.Certificate{ca.cert}}, OCSP: &OCSPOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { chk.Run(ctx); close(done) }()
	testwait.For(t, "the first CRL", func() bool { return chk.crl.Current(crlSrv.URL) != nil })
	if err := chk.Verify(context.Background(), [][]*smx509.Certificate{{leaf, ca.cert}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	chk.Close()
	goleak.VerifyNone(t, ignore)
}

// Package testocsp is a certificate authority that runs its own OCSP
// responder, for tests of OCSP stapling: the certificates it issues name
// the responder in their authorityInfoAccess, and the responder answers
// good, or revoked for the serials a test revokes. An ECDSA CA (New)
// issues TLS certificates; an SM2 CA (NewSM2) issues TLCP pairs and
// signs its answers with SM2-with-SM3.
//
// It is for tests only. It imports nothing but the standard library,
// golang.org/x/crypto and gmsm.
package testocsp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// CA issues certificates whose OCSP responder it runs.
type CA struct {
	// Cert and Key are those of an ECDSA CA (New); nil for an SM2 one.
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// SM2 is the SM2 CA (NewSM2); nil for an ECDSA one.
	SM2 *SM2CA
	// URL is the responder's address.
	URL string
	// Validity is how long each answer is current (nextUpdate -
	// thisUpdate); an hour unless set before the first request.
	Validity time.Duration

	server   *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	revoked  map[string]bool
	down     bool
	serial   atomic.Int64
}

// New starts a CA and its responder on loopback; both end with the test.
func New(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "OCSP test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Key: key}
	ca.Cert, _ = x509.ParseCertificate(der)
	ca.start(t)
	return ca
}

// start runs the responder.
func (ca *CA) start(t testing.TB) {
	ca.Validity = time.Hour
	ca.revoked = map[string]bool{}
	ca.serial.Store(100)
	ca.server = httptest.NewServer(http.HandlerFunc(ca.answer))
	t.Cleanup(ca.server.Close)
	ca.URL = ca.server.URL + "/ocsp"
}

// Leaf is a TLS server certificate of the CA.
type Leaf struct {
	Cert *x509.Certificate
	// ChainPEM is the certificate followed by the CA's, as a server's
	// certificate file holds them; KeyPEM its PKCS#8 key.
	ChainPEM, KeyPEM []byte
}

// Issue makes a server certificate for names that names the responder.
func (ca *CA) Issue(t testing.TB, names ...string) *Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		OCSPServer: []string{ca.URL},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &Leaf{KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})}
	l.Cert, _ = x509.ParseCertificate(der)
	l.ChainPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})...)
	return l
}

// Revoke makes the responder answer revoked for the certificate.
func (ca *CA) Revoke(serial *big.Int) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.revoked[serial.String()] = true
}

// SetDown makes the responder answer 503 (true) or answer again.
func (ca *CA) SetDown(down bool) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.down = down
}

// Requests is the number of requests the responder received.
func (ca *CA) Requests() int64 { return ca.requests.Load() }

func (ca *CA) answer(w http.ResponseWriter, r *http.Request) {
	ca.requests.Add(1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := ocsp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ca.mu.Lock()
	down, revoked, validity := ca.down, ca.revoked[req.SerialNumber.String()], ca.Validity
	ca.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	now := time.Now().Truncate(time.Second)
	tmpl := ocsp.Response{Status: ocsp.Good, SerialNumber: req.SerialNumber, ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(-time.Minute + validity)}
	if revoked {
		tmpl.Status, tmpl.RevokedAt, tmpl.RevocationReason = ocsp.Revoked, now.Add(-time.Hour), ocsp.KeyCompromise
	}
	var der []byte
	if ca.SM2 != nil {
		der, err = ca.SM2.response(req, tmpl)
	} else {
		der, err = ocsp.CreateResponse(ca.Cert, ca.Cert, tmpl, ca.Key)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	_, _ = w.Write(der)
}

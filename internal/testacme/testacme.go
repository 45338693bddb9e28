// Package testacme runs Pebble, the ACME test CA, inside a test, with a
// DNS server that sends every name to loopback, so that Pebble's
// validation reaches the challenge answers of the server under test.
//
// It is for tests only.
package testacme

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
	"golang.org/x/crypto/ocsp"
)

// Pebble is an ACME CA on loopback. Its directory answers once Start has
// said where the challenges are validated; requests made before wait.
type Pebble struct {
	// DirectoryURL is the ACME directory.
	DirectoryURL string
	// ServerRoots verify the directory's HTTPS certificate.
	ServerRoots *x509.CertPool

	t       testing.TB
	srv     *httptest.Server
	store   *db.MemoryStore
	ca      *ca.CAImpl
	started chan struct{}
	// ocspRequests counts NewWithOCSP's responder's requests.
	ocspRequests atomic.Int64
	once         sync.Once
	resolver     string
	handler      http.Handler
}

// New starts a Pebble whose validation is configured by Start.
func New(t testing.TB) *Pebble {
	t.Helper()
	return newPebble(t, "ecdsa", "")
}

// NewWithOCSP is New with an OCSP responder: the certificates Pebble
// issues name it, and it answers good for them, signed by Pebble's
// intermediate (an RSA chain, whose key Pebble hands out).
func NewWithOCSP(t testing.TB) *Pebble {
	t.Helper()
	var p *Pebble
	responder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.answerOCSP(w, r) }))
	t.Cleanup(responder.Close)
	p = newPebble(t, "rsa", responder.URL+"/ocsp")
	return p
}

// OCSPRequests is the number of requests NewWithOCSP's responder got.
func (p *Pebble) OCSPRequests() int64 { return p.ocspRequests.Load() }

func (p *Pebble) answerOCSP(w http.ResponseWriter, r *http.Request) {
	p.ocspRequests.Add(1)
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
	issuer, key := p.ca.GetIntermediateCert(0), p.ca.GetIntermediateKey(0)
	if issuer == nil || key == nil {
		http.Error(w, "no RSA intermediate", http.StatusInternalServerError)
		return
	}
	now := time.Now().Truncate(time.Second)
	der, err := ocsp.CreateResponse(issuer.Cert, issuer.Cert, ocsp.Response{Status: ocsp.Good, SerialNumber: req.SerialNumber,
		ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour)}, key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	_, _ = w.Write(der)
}

func newPebble(t testing.TB, keyAlg, ocspURL string) *Pebble {
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	quiet := log.New(io.Discard, "", 0)
	p := &Pebble{t: t, store: db.NewMemoryStore(), started: make(chan struct{}), resolver: loopbackDNS(t)}
	p.ca = ca.New(quiet, p.store, ocspURL, keyAlg, 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-p.started:
		case <-r.Context().Done():
			return
		}
		p.handler.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	p.DirectoryURL = p.srv.URL + wfe.DirectoryPath
	p.ServerRoots = x509.NewCertPool()
	p.ServerRoots.AddCert(p.srv.Certificate())
	return p
}

// Start makes Pebble validate HTTP-01 challenges on httpPort and
// TLS-ALPN-01 challenges on tlsPort of 127.0.0.1 (0 for the standard
// port), and opens the directory.
func (p *Pebble) Start(httpPort, tlsPort int) {
	p.once.Do(func() {
		quiet := log.New(io.Discard, "", 0)
		v := va.New(quiet, httpPort, tlsPort, false, p.resolver, p.store)
		front := wfe.New(quiet, p.store, v, p.ca, []string{"pebble.letsencrypt.org"}, false, false, 3, 5)
		p.handler = front.Handler()
		close(p.started)
	})
}

// WriteServerRoot writes the directory's HTTPS root as PEM into dir and
// returns its path (for a client's trusted roots).
func (p *Pebble) WriteServerRoot(dir string) string {
	p.t.Helper()
	path := filepath.Join(dir, "acme-server-root.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// IssuerRoots verify the certificates Pebble issues.
func (p *Pebble) IssuerRoots() *x509.CertPool {
	p.t.Helper()
	root := p.ca.GetRootCert(0)
	if root == nil {
		p.t.Fatal("pebble has no root")
	}
	pool := x509.NewCertPool()
	pool.AddCert(root.Cert)
	return pool
}

// loopbackDNS answers every A query with 127.0.0.1 (and AAAA with
// nothing).
func loopbackDNS(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

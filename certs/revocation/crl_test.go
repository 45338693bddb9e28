package revocation

import (
	"context"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/testpki"
)

// A CRL signed with SM2 (and one signed with ECDSA) lists the revoked
// client certificate and not the other one, from a DER and a PEM file.
func TestCRLRevokedAndGood(t *testing.T) {
	for _, kind := range []string{"sm2", "ecdsa"} {
		t.Run(kind, func(t *testing.T) {
			ca := newCA(t, kind)
			revoked, good := ca.client(t, "revoked client", ""), ca.client(t, "good client", "")
			der := ca.crl(t, 1, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), revoked.SerialNumber)
			dir := t.TempDir()
			derFile, pemFile := filepath.Join(dir, "ca.crl"), filepath.Join(dir, "ca.crl.pem")
			os.WriteFile(derFile, der, 0o644)
			os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644)
			for _, file := range []string{derFile, pemFile} {
				c, err := NewCRLChecker(CRLOptions{Sources: []string{file}, Issuers: []*smx509.Certificate{ca.cert}})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
				r := c.Check(revoked, ca.cert)
				if r.Status != StatusRevoked || r.Reason != ReasonKeyCompromise || r.Source != "CRL "+file {
					t.Errorf("%s: revoked certificate: %+v", file, r)
				}
				if r := c.Check(good, ca.cert); r.Status != StatusGood {
					t.Errorf("%s: good certificate: %+v", file, r)
				}
				if crl := c.Current(file); kind == "sm2" && crl.SignatureAlgorithm != smx509.SM2WithSM3 {
					t.Errorf("signature algorithm %v, want SM2-with-SM3", crl.SignatureAlgorithm)
				}
			}
		})
	}
}

// A CRL is refused when no configured CA issued it, when its signature
// does not verify, when it is a delta CRL, or when it covers only CA
// certificates; a certificate of a CA without a CRL is unknown.
func TestCRLRefused(t *testing.T) {
	ca, sameNamed := newCA(t, "sm2"), newCA(t, "sm2")
	o := testpki.NewCA(t, "another CA")
	other := &testCA{cert: o.Cert, key: o.Key}
	now := time.Now()
	good := ca.crl(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	altered := append([]byte{}, good...)
	altered[len(altered)-5] ^= 1
	delta := func() []byte {
		v, _ := asn1.Marshal(big.NewInt(1))
		tmpl := &smx509.RevocationList{Number: big.NewInt(2), ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(time.Hour),
			ExtraExtensions: []pkix.Extension{{Id: oidDeltaCRLIndicator, Critical: true, Value: v}}}
		der, err := smx509.CreateRevocationList(nil, tmpl, ca.cert, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}()
	caOnly := func() []byte {
		// issuingDistributionPoint { onlyContainsCACerts [2] TRUE }
		tmpl := &smx509.RevocationList{Number: big.NewInt(2), ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(time.Hour),
			ExtraExtensions: []pkix.Extension{{Id: oidIssuingDistribution, Critical: true, Value: []byte{0x30, 0x03, 0x82, 0x01, 0xff}}}}
		der, err := smx509.CreateRevocationList(nil, tmpl, ca.cert, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}()
	// Same name, other key.
	sameName := sign(t, &smx509.Certificate{SerialNumber: big.NewInt(9), Subject: ca.cert.Subject, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: smx509.KeyUsageCRLSign | smx509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}, sameNamed.cert, sameNamed.cert.PublicKey, sameNamed.key)
	for _, tc := range []struct {
		name    string
		der     []byte
		issuers []*smx509.Certificate
		want    string
	}{
		{"other CA", good, []*smx509.Certificate{other.cert}, "none of the CAs"},
		{"altered", altered, []*smx509.Certificate{ca.cert}, "does not verify"},
		{"same name other key", good, []*smx509.Certificate{sameName}, "signed by another key"},
		{"delta", delta, []*smx509.Certificate{ca.cert}, "delta CRL"},
		{"CA certificates only", caOnly, []*smx509.Certificate{ca.cert}, "only CA"},
		{"garbage", []byte("not a crl"), []*smx509.Certificate{ca.cert}, "not a CRL"},
		{"wrong PEM", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), []*smx509.Certificate{ca.cert}, "not a PEM CRL"},
	} {
		if _, err := ParseCRL(tc.der, tc.issuers); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}

	// A certificate from a CA no loaded CRL covers has an unknown status.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crl"), good, 0o644)
	c, err := NewCRLChecker(CRLOptions{Sources: []string{filepath.Join(dir, "ca.crl")}, Issuers: []*smx509.Certificate{ca.cert, other.cert}})
	if err != nil {
		t.Fatal(err)
	}
	c.Refresh(context.Background())
	if r := c.Check(other.client(t, "c", ""), other.cert); r.Status != StatusUnknown || !strings.Contains(r.Detail, "no loaded CRL") {
		t.Errorf("certificate of a CA without CRL: %+v", r)
	}
}

// A source that serves an older CRL than the one loaded (a replayed
// CRL) keeps the newer one; a CRL whose thisUpdate is in the future is
// not loaded.
func TestCRLOlderNotTaken(t *testing.T) {
	ca := newCA(t, "ecdsa")
	revoked := ca.client(t, "c", "")
	now := time.Now()
	file := filepath.Join(t.TempDir(), "ca.crl")
	os.WriteFile(file, ca.crl(t, 5, now.Add(-time.Hour), now.Add(time.Hour), revoked.SerialNumber), 0o644)
	c, _ := NewCRLChecker(CRLOptions{Sources: []string{file}, Issuers: []*smx509.Certificate{ca.cert}})
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, ca.crl(t, 4, now.Add(-2*time.Hour), now.Add(time.Hour)), 0o644)
	if err := c.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "older than the CRL already loaded") {
		t.Errorf("older CRL: %v", err)
	}
	if r := c.Check(revoked, ca.cert); r.Status != StatusRevoked {
		t.Errorf("after an older CRL: %+v", r)
	}
	os.WriteFile(file, ca.crl(t, 6, now.Add(time.Hour), now.Add(2*time.Hour)), 0o644)
	if err := c.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "in the future") {
		t.Errorf("future CRL: %v", err)
	}
}

// A CRL URL that goes away: the last good CRL serves until its
// nextUpdate plus the grace (the state goes failing, then stale), then
// the certificates it covers are unknown and the policy decides;
// fail_closed refuses, fail_open admits, a revoked one is refused by
// both while the CRL is usable.
func TestCRLURLGoneAway(t *testing.T) {
	ca := newCA(t, "sm2")
	revoked, good := ca.client(t, "revoked", ""), ca.client(t, "good", "")
	clk := newClock()
	der := ca.crl(t, 1, clk.Now().Add(-time.Hour), clk.Now().Add(2*time.Hour), revoked.SerialNumber)
	var down atomic.Bool
	var body atomic.Pointer[[]byte]
	body.Store(&der)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "gone", http.StatusNotFound)
			return
		}
		w.Write(*body.Load())
	}))
	defer srv.Close()
	url := srv.URL + "/ca.crl"
	for _, policy := range []Policy{FailClosed, FailOpen} {
		t.Run(string(policy), func(t *testing.T) {
			down.Store(false)
			body.Store(&der)
			clk := &clock{now: clk.Now()}
			rec := &recorder{}
			chk, err := New(Options{CRL: &CRLOptions{Sources: []string{url}, Issuers: []*smx509.Certificate{ca.cert}, Grace: 30 * time.Minute},
				Policy: policy, Observer: rec, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			if err := chk.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			chain := func(c *smx509.Certificate) [][]*smx509.Certificate { return [][]*smx509.Certificate{{c, ca.cert}} }
			if err := chk.Verify(context.Background(), chain(good)); err != nil {
				t.Fatalf("good, fresh CRL: %v", err)
			}
			var re *Error
			if err := chk.Verify(context.Background(), chain(revoked)); !errors.As(err, &re) || !re.Revoked() || re.Alert() != 44 {
				t.Fatalf("revoked, fresh CRL: %v", err)
			}
			if got := rec.lastState(); got != "CRL "+url+" ok" {
				t.Errorf("state %q", got)
			}

			down.Store(true)
			if err := chk.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
				t.Errorf("refresh of a gone URL: %v", err)
			}
			if got := rec.lastState(); got != "CRL "+url+" failing" {
				t.Errorf("state %q, want failing", got)
			}
			clk.advance(2*time.Hour + time.Minute) // past nextUpdate, within the grace
			chk.Refresh(context.Background())
			if got := rec.lastState(); got != "CRL "+url+" stale" {
				t.Errorf("state %q, want stale", got)
			}
			if err := chk.Verify(context.Background(), chain(good)); err != nil {
				t.Errorf("good within the grace: %v", err)
			}
			if err := chk.Verify(context.Background(), chain(revoked)); !errors.As(err, &re) || !re.Revoked() {
				t.Errorf("revoked within the grace: %v", err)
			}

			clk.advance(30 * time.Minute) // past the grace
			chk.Refresh(context.Background())
			if got := rec.lastState(); got != "CRL "+url+" expired" {
				t.Errorf("state %q, want expired", got)
			}
			for _, c := range []*smx509.Certificate{good, revoked} {
				err := chk.Verify(context.Background(), chain(c))
				if policy == FailClosed && (!errors.As(err, &re) || re.Revoked() || re.Alert() != 46 || !strings.Contains(err.Error(), "expired")) {
					t.Errorf("%s after the grace, fail_closed: %v", c.Subject.CommonName, err)
				}
				if policy == FailOpen && err != nil {
					t.Errorf("%s after the grace, fail_open: %v", c.Subject.CommonName, err)
				}
			}
			rec.mu.Lock()
			if n := len(rec.decided); n < 3 || rec.decided[n-1].Status != StatusUnknown || rec.refused[n-1] != (policy == FailClosed) {
				t.Errorf("observer heard %+v %v", rec.decided, rec.refused)
			}
			rec.mu.Unlock()

			// The URL comes back: fresh again.
			down.Store(false)
			der2 := ca.crl(t, 2, clk.Now().Add(-time.Minute), clk.Now().Add(time.Hour), revoked.SerialNumber)
			body.Store(&der2)
			if err := chk.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := chk.Verify(context.Background(), chain(good)); err != nil {
				t.Errorf("good after the URL came back: %v", err)
			}
		})
	}
}

// Oversized CRLs are refused from files and URLs (with and without a
// Content-Length), keeping the CRL already loaded.
func TestCRLOversized(t *testing.T) {
	ca := newCA(t, "ecdsa")
	der := ca.crl(t, 1, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	big := make([]byte, 4096)
	copy(big, der)
	file := filepath.Join(t.TempDir(), "big.crl")
	os.WriteFile(file, big, 0o644)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			for i := 0; i < 4; i++ {
				w.Write(big[i*1024 : (i+1)*1024])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write(big)
	}))
	defer srv.Close()
	for _, src := range []string{file, srv.URL + "/sized", srv.URL + "/chunked"} {
		c, err := NewCRLChecker(CRLOptions{Sources: []string{src}, Issuers: []*smx509.Certificate{ca.cert}, MaxBytes: 2048})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "larger than allowed") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// Concurrent checks during refreshes see one CRL or the next, never a
// torn state (run with -race).
func TestCRLConcurrentRefreshAndCheck(t *testing.T) {
	ca := newCA(t, "ecdsa")
	revoked := ca.client(t, "c", "")
	file := filepath.Join(t.TempDir(), "ca.crl")
	os.WriteFile(file, ca.crl(t, 1, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), revoked.SerialNumber), 0o644)
	c, _ := NewCRLChecker(CRLOptions{Sources: []string{file}, Issuers: []*smx509.Certificate{ca.cert}})
	c.Refresh(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if r := c.Check(revoked, ca.cert); r.Status != StatusRevoked {
					t.Errorf("check during refresh: %+v", r)
					return
				}
			}
		}()
	}
	for i := 0; i < 10; i++ {
		c.Refresh(context.Background())
	}
	wg.Wait()
}

// Run loads the sources at once and stops when its context ends.
func TestCRLRunLoadsAndStops(t *testing.T) {
	ca := newCA(t, "sm2")
	file := filepath.Join(t.TempDir(), "ca.crl")
	os.WriteFile(file, ca.crl(t, 1, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)), 0o644)
	c, _ := NewCRLChecker(CRLOptions{Sources: []string{file}, Issuers: []*smx509.Certificate{ca.cert}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	deadline := time.After(20 * time.Second)
	for c.Current(file) == nil {
		select {
		case <-deadline:
			t.Fatal("Run did not load the CRL")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
}

// Options are checked: sources, URLs, issuers, policy names.
func TestCRLOptionsChecked(t *testing.T) {
	ca := newCA(t, "ecdsa")
	is := []*smx509.Certificate{ca.cert}
	for _, tc := range []struct {
		opts CRLOptions
		want string
	}{
		{CRLOptions{Issuers: is}, "no CRL source"},
		{CRLOptions{Sources: []string{"http://"}, Issuers: is}, "http:// or https://"},
		{CRLOptions{Sources: []string{"a.crl", "a.crl"}, Issuers: is}, "twice"},
		{CRLOptions{Sources: []string{"https://user:secret@ca.example/x.crl", "https://user:secret@ca.example/x.crl"}, Issuers: is}, "https://ca.example/x.crl is given twice"},
	} {
		_, err := NewCRLChecker(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%+v: %v, want %q", tc.opts.Sources, err, tc.want)
		}
	}
	if _, err := ParsePolicy("fail_sometimes"); err == nil {
		t.Error("unknown policy accepted")
	}
	if r, err := ParseReason("key-compromise"); err != nil || r != ReasonKeyCompromise {
		t.Errorf("ParseReason: %v %v", r, err)
	}
}

// A CRL signed by an intermediate CA that is not among the Issuers (the
// clients send it in their chains) is checked with the intermediate of
// the verified chain; one signed by another key of the same name covers
// nothing.
func TestCRLOfIntermediateFromChain(t *testing.T) {
	for _, kind := range []string{"sm2", "ecdsa"} {
		t.Run(kind, func(t *testing.T) {
			root := newCA(t, kind)
			inter := root.intermediate(t, "issuing CA")
			impostor := newCA(t, kind).intermediate(t, "issuing CA")
			revoked, good := inter.client(t, "revoked", ""), inter.client(t, "good", "")
			now := time.Now()
			dir := t.TempDir()
			for name, ca := range map[string]*testCA{"real.crl": inter, "forged.crl": impostor} {
				os.WriteFile(filepath.Join(dir, name), ca.crl(t, 1, now.Add(-time.Hour), now.Add(time.Hour), revoked.SerialNumber), 0o644)
			}
			c, err := NewCRLChecker(CRLOptions{Sources: []string{filepath.Join(dir, "real.crl")}, Issuers: []*smx509.Certificate{root.cert}})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r := c.Check(revoked, inter.cert); r.Status != StatusRevoked {
				t.Errorf("revoked: %+v", r)
			}
			if r := c.Check(good, inter.cert); r.Status != StatusGood {
				t.Errorf("good: %+v", r)
			}
			c, _ = NewCRLChecker(CRLOptions{Sources: []string{filepath.Join(dir, "forged.crl")}, Issuers: []*smx509.Certificate{root.cert}})
			if err := c.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // the second answer comes from the memo
				if r := c.Check(good, inter.cert); r.Status != StatusUnknown || !strings.Contains(r.Detail, "another key") && !strings.Contains(r.Detail, "does not verify") {
					t.Errorf("forged CRL: %+v", r)
				}
			}
		})
	}
}

package revocation

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/ocsp"
)

// A responder on loopback, found through the certificate's AIA, answers
// good, revoked and unknown in SM2- and ECDSA-signed responses; answers
// are cached until their nextUpdate.
func TestOCSPGoodRevokedUnknown(t *testing.T) {
	for _, kind := range []string{"sm2", "ecdsa"} {
		t.Run(kind, func(t *testing.T) {
			ca := newCA(t, kind)
			resp := newResponder(t, ca)
			good, revoked, unknown := ca.client(t, "good", resp.srv.URL), ca.client(t, "revoked", resp.srv.URL), ca.client(t, "unknown", resp.srv.URL)
			now := time.Now()
			resp.set(good.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now.Add(-time.Minute), nextUpdate: now.Add(time.Hour)})
			resp.set(revoked.SerialNumber, ocspAnswer{status: StatusRevoked, revokedAt: now.Add(-time.Hour), reason: ReasonKeyCompromise, thisUpdate: now.Add(-time.Minute), nextUpdate: now.Add(time.Hour)})
			o, err := NewOCSPChecker(OCSPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if r := o.Check(ctx, good, ca.cert); r.Status != StatusGood || r.Source != "OCSP "+resp.srv.URL {
				t.Errorf("good: %+v", r)
			}
			r := o.Check(ctx, revoked, ca.cert)
			if r.Status != StatusRevoked || r.Reason != ReasonKeyCompromise || !r.RevokedAt.Equal(now.Add(-time.Hour).Truncate(time.Second)) {
				t.Errorf("revoked: %+v", r)
			}
			if r := o.Check(ctx, unknown, ca.cert); r.Status != StatusUnknown || !strings.Contains(r.Detail, "does not know") {
				t.Errorf("unknown: %+v", r)
			}
			asked := resp.requests.Load()
			for i := 0; i < 3; i++ {
				o.Check(ctx, good, ca.cert)
				o.Check(ctx, revoked, ca.cert)
			}
			if n := resp.requests.Load(); n != asked {
				t.Errorf("cached answers asked the responder again: %d requests, then %d", asked, n)
			}
		})
	}
}

// The Checker refuses a certificate the responder says is revoked and
// admits a good one, through Verify and VerifyX509 (crypto/tls chains).
func TestOCSPCheckerVerify(t *testing.T) {
	ca := newCA(t, "ecdsa")
	resp := newResponder(t, ca)
	good, revoked := ca.client(t, "good", resp.srv.URL), ca.client(t, "revoked", resp.srv.URL)
	now := time.Now()
	resp.set(good.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
	resp.set(revoked.SerialNumber, ocspAnswer{status: StatusRevoked, revokedAt: now, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
	rec := &recorder{}
	chk, err := New(Options{OCSP: &OCSPOptions{}, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	x := func(c *smx509.Certificate) *x509.Certificate {
		xc, err := x509.ParseCertificate(c.Raw)
		if err != nil {
			t.Fatal(err)
		}
		return xc
	}
	ctx := context.Background()
	if err := chk.Verify(ctx, [][]*smx509.Certificate{{good, ca.cert}}); err != nil {
		t.Errorf("good: %v", err)
	}
	if err := chk.VerifyX509(ctx, [][]*x509.Certificate{{x(good), x(ca.cert)}}); err != nil {
		t.Errorf("good (x509): %v", err)
	}
	var re *Error
	if err := chk.VerifyX509(ctx, [][]*x509.Certificate{{x(revoked), x(ca.cert)}}); !errors.As(err, &re) || !re.Revoked() {
		t.Errorf("revoked (x509): %v", err)
	}
	if err := chk.Verify(ctx, [][]*smx509.Certificate{{revoked, ca.cert}}); !errors.As(err, &re) || !re.Revoked() || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked: %v", err)
	}
	// No client certificate (client_auth verify_if_given): nothing to
	// revoke, nothing reported.
	if err := chk.Verify(ctx, nil); err != nil {
		t.Errorf("no chains: %v", err)
	}
	if err := chk.VerifyX509(ctx, nil); err != nil {
		t.Errorf("no chains (x509): %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decided) != 2 || !rec.refused[0] || rec.decided[0].Status != StatusRevoked {
		t.Errorf("observer heard %+v", rec.decided)
	}
}

// A delegated responder certificate works only with id-kp-OCSPSigning
// from the CA; a response signed by another CA or for another
// certificate is not believed.
func TestOCSPResponderAuthority(t *testing.T) {
	for _, kind := range []string{"sm2", "ecdsa"} {
		t.Run(kind, func(t *testing.T) {
			ca, other := newCA(t, kind), newCA(t, kind)
			resp := newResponder(t, ca)
			leaf := ca.client(t, "c", resp.srv.URL)
			now := time.Now()
			resp.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
			check := func() Result {
				o, _ := NewOCSPChecker(OCSPOptions{})
				return o.Check(context.Background(), leaf, ca.cert)
			}
			resp.delegate, resp.dkey = ca.responderCert(t, true)
			if r := check(); r.Status != StatusGood {
				t.Errorf("delegated responder: %+v", r)
			}
			resp.delegate, resp.dkey = ca.responderCert(t, false)
			if r := check(); r.Status != StatusUnknown || !strings.Contains(r.Detail, "not authorised") {
				t.Errorf("responder without OCSPSigning: %+v", r)
			}
			d, k := other.responderCert(t, true)
			resp.delegate, resp.dkey = d, k
			if r := check(); r.Status != StatusUnknown || !strings.Contains(r.Detail, "signed neither") && !strings.Contains(r.Detail, "not issued") {
				t.Errorf("responder of another CA: %+v", r)
			}
			resp.delegate = nil
			id, _ := newCertID(hashByOID(oidSHA1), oidSHA1, fromSM(ca.cert), big.NewInt(12345))
			resp.raw = ocspResponseDER(t, ca.cert, ca.key, false, id, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
			if r := check(); r.Status != StatusUnknown || !strings.Contains(r.Detail, "does not answer for the certificate") {
				t.Errorf("answer about another serial: %+v", r)
			}
			resp.raw = statusOnly(ocspTryLater)
			if r := check(); r.Status != StatusUnknown || !strings.Contains(r.Detail, "tryLater") {
				t.Errorf("tryLater: %+v", r)
			}
			resp.raw = []byte("<html>")
			if r := check(); r.Status != StatusUnknown || !strings.Contains(r.Detail, "malformed") {
				t.Errorf("garbage: %+v", r)
			}
		})
	}
}

// A responder that goes away: the cached answer serves until its
// nextUpdate plus the grace, the responder is not asked again before
// the retry time, then the status is unknown and the policy decides.
func TestOCSPResponderGoneAway(t *testing.T) {
	ca := newCA(t, "sm2")
	resp := newResponder(t, ca)
	leaf := ca.client(t, "c", resp.srv.URL)
	clk := newClock()
	resp.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: clk.Now().Add(-time.Minute), nextUpdate: clk.Now().Add(time.Hour)})
	rec := &recorder{}
	chk, err := New(Options{OCSP: &OCSPOptions{Grace: 20 * time.Minute, Retry: time.Minute}, Observer: rec, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	chain := [][]*smx509.Certificate{{leaf, ca.cert}}
	if err := chk.Verify(ctx, chain); err != nil {
		t.Fatal(err)
	}
	resp.down.Store(true)
	clk.advance(time.Hour + time.Minute)
	if err := chk.Verify(ctx, chain); err != nil {
		t.Errorf("within the grace: %v", err)
	}
	if got := rec.lastState(); got != "OCSP "+resp.srv.URL+" stale" {
		t.Errorf("state %q, want stale", got)
	}
	asked := resp.requests.Load()
	for i := 0; i < 5; i++ {
		chk.Verify(ctx, chain)
	}
	if n := resp.requests.Load(); n != asked {
		t.Errorf("a failing responder was asked again before the retry time: %d then %d", asked, n)
	}
	clk.advance(20 * time.Minute)
	var re *Error
	if err := chk.Verify(ctx, chain); !errors.As(err, &re) || re.Revoked() || !strings.Contains(err.Error(), "503") {
		t.Errorf("after the grace: %v", err)
	}
	if got := rec.lastState(); got != "OCSP "+resp.srv.URL+" expired" {
		t.Errorf("state %q, want expired", got)
	}
	resp.down.Store(false)
	clk.advance(2 * time.Minute)
	resp.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: clk.Now(), nextUpdate: clk.Now().Add(time.Hour)})
	if err := chk.Verify(ctx, chain); err != nil {
		t.Errorf("responder back: %v", err)
	}
	if got := rec.lastState(); got != "OCSP "+resp.srv.URL+" ok" {
		t.Errorf("state %q", got)
	}
}

// An oversized response is refused; the cache holds at most its bounds;
// concurrent checks of one certificate send one request.
func TestOCSPBounds(t *testing.T) {
	ca := newCA(t, "ecdsa")
	resp := newResponder(t, ca)
	leaf := ca.client(t, "c", resp.srv.URL)
	resp.raw = make([]byte, 5000)
	o, _ := NewOCSPChecker(OCSPOptions{MaxBytes: 4096})
	if r := o.Check(context.Background(), leaf, ca.cert); r.Status != StatusUnknown || !strings.Contains(r.Detail, "larger than allowed") {
		t.Errorf("oversized: %+v", r)
	}
	resp.raw = nil

	o, _ = NewOCSPChecker(OCSPOptions{CacheEntries: 3})
	now := time.Now()
	for i := 0; i < 6; i++ {
		c := ca.client(t, fmt.Sprint("c", i), resp.srv.URL)
		resp.set(c.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
		if r := o.Check(context.Background(), c, ca.cert); r.Status != StatusGood {
			t.Fatalf("%d: %+v", i, r)
		}
		if n, _ := o.CacheLen(); n > 3 {
			t.Fatalf("cache holds %d entries, bound 3", n)
		}
	}
	o, _ = NewOCSPChecker(OCSPOptions{CacheBytes: 1000})
	for i := 0; i < 6; i++ {
		c := ca.client(t, fmt.Sprint("b", i), resp.srv.URL)
		resp.set(c.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
		o.Check(context.Background(), c, ca.cert)
		if _, b := o.CacheLen(); b > 1000 {
			t.Fatalf("cache holds %d bytes, bound 1000", b)
		}
	}

	o, _ = NewOCSPChecker(OCSPOptions{})
	c := ca.client(t, "same", resp.srv.URL)
	resp.set(c.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
	before := resp.requests.Load()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := o.Check(context.Background(), c, ca.cert); r.Status != StatusGood {
				t.Errorf("concurrent: %+v", r)
			}
		}()
	}
	wg.Wait()
	if n := resp.requests.Load() - before; n != 1 {
		t.Errorf("8 concurrent checks of one certificate sent %d requests, want 1", n)
	}
}

// A configured responder replaces the AIA; SM3 and SHA-256 CertIDs are
// asked and understood; a certificate without a responder is unknown.
func TestOCSPConfiguredResponderAndHashes(t *testing.T) {
	ca := newCA(t, "sm2")
	resp := newResponder(t, ca)
	leaf := ca.client(t, "no AIA", "")
	now := time.Now()
	resp.set(leaf.SerialNumber, ocspAnswer{status: StatusRevoked, revokedAt: now, thisUpdate: now, nextUpdate: now.Add(time.Hour)})
	o, _ := NewOCSPChecker(OCSPOptions{})
	if r := o.Check(context.Background(), leaf, ca.cert); r.Status != StatusUnknown || !strings.Contains(r.Detail, "names no OCSP responder") {
		t.Errorf("no responder: %+v", r)
	}
	for _, h := range []Hash{HashSHA1, HashSHA256, HashSM3} {
		o, err := NewOCSPChecker(OCSPOptions{Responder: resp.srv.URL, Hash: h})
		if err != nil {
			t.Fatal(err)
		}
		if r := o.Check(context.Background(), leaf, ca.cert); r.Status != StatusRevoked {
			t.Errorf("%s: %+v", h, r)
		}
	}
	if _, err := NewOCSPChecker(OCSPOptions{Hash: "md5"}); err == nil {
		t.Error("md5 accepted")
	}
	if _, err := NewOCSPChecker(OCSPOptions{Responder: "ldap://x"}); err == nil {
		t.Error("an ldap responder accepted")
	}
}

// golang.org/x/crypto/ocsp, an independent implementation, reads the
// requests this package sends, and this package reads its ECDSA-signed
// responses (with and without a delegated responder).
func TestOCSPInteropXCrypto(t *testing.T) {
	ca := newCA(t, "ecdsa")
	leaf := ca.client(t, "c", "")
	id, _ := newCertID(hashByOID(oidSHA1), oidSHA1, fromSM(ca.cert), leaf.SerialNumber)
	req, err := ocsp.ParseRequest(marshalOCSPRequest(id))
	if err != nil {
		t.Fatal(err)
	}
	xca, _ := x509.ParseCertificate(ca.cert.Raw)
	xleaf, _ := x509.ParseCertificate(leaf.Raw)
	want, _ := ocsp.CreateRequest(xleaf, xca, nil)
	wantReq, _ := ocsp.ParseRequest(want)
	if req.SerialNumber.Cmp(leaf.SerialNumber) != 0 || string(req.IssuerKeyHash) != string(wantReq.IssuerKeyHash) || string(req.IssuerNameHash) != string(wantReq.IssuerNameHash) {
		t.Errorf("x/crypto/ocsp reads the request as %+v, want %+v", req, wantReq)
	}

	now := time.Now().Truncate(time.Second)
	delegate, dkey := ca.responderCert(t, true)
	xdelegate, _ := x509.ParseCertificate(delegate.Raw)
	for _, tc := range []struct {
		name   string
		signer *x509.Certificate
		key    crypto.Signer
		status int
	}{
		{"by the CA, revoked", xca, ca.key, ocsp.Revoked},
		{"by a delegate, good", xdelegate, dkey, ocsp.Good},
	} {
		tmpl := ocsp.Response{Status: tc.status, SerialNumber: leaf.SerialNumber, ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour),
			RevokedAt: now.Add(-time.Hour), RevocationReason: ocsp.KeyCompromise}
		if tc.signer != xca {
			tmpl.Certificate = tc.signer
		}
		der, err := ocsp.CreateResponse(xca, tc.signer, tmpl, tc.key.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		sr, err := checkOCSPAnswer(der, ca.cert, fromSM(ca.cert), leaf.SerialNumber, now, time.Hour)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.status == ocsp.Revoked && (sr.status != StatusRevoked || sr.reason != ReasonKeyCompromise || !sr.revokedAt.Equal(now.Add(-time.Hour))) ||
			tc.status == ocsp.Good && sr.status != StatusGood {
			t.Errorf("%s: read %+v", tc.name, sr)
		}
	}
}

// An answer whose nextUpdate lies days ahead is asked for again after
// Refresh; while the responder fails, it serves until its nextUpdate
// (state failing), without asking on every check.
func TestOCSPRefreshBeforeNextUpdate(t *testing.T) {
	ca := newCA(t, "ecdsa")
	resp := newResponder(t, ca)
	leaf := ca.client(t, "c", resp.srv.URL)
	clk := newClock()
	resp.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: clk.Now(), nextUpdate: clk.Now().Add(48 * time.Hour)})
	rec := &recorder{}
	o, _ := NewOCSPChecker(OCSPOptions{Refresh: time.Hour, Retry: time.Minute, Observer: rec, Now: clk.Now})
	ctx := context.Background()
	if r := o.Check(ctx, leaf, ca.cert); r.Status != StatusGood {
		t.Fatalf("%+v", r)
	}
	clk.advance(30 * time.Minute)
	o.Check(ctx, leaf, ca.cert)
	if n := resp.requests.Load(); n != 1 {
		t.Errorf("%d requests within Refresh, want 1", n)
	}
	clk.advance(time.Hour)
	o.Check(ctx, leaf, ca.cert)
	if n := resp.requests.Load(); n != 2 {
		t.Errorf("%d requests after Refresh, want 2", n)
	}
	resp.down.Store(true)
	clk.advance(2 * time.Hour)
	for i := 0; i < 3; i++ {
		if r := o.Check(ctx, leaf, ca.cert); r.Status != StatusGood || !strings.Contains(r.Detail, "still current") {
			t.Errorf("responder down before nextUpdate: %+v", r)
		}
	}
	if n := resp.requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3: a failing responder is asked again only after Retry", n)
	}
	if got := rec.lastState(); got != "OCSP "+resp.srv.URL+" failing" {
		t.Errorf("state %q, want failing", got)
	}
}

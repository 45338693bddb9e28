package revocation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Sources reports each CRL source's state, CRL times, entries and last
// fetch, and each OCSP responder asked, with URLs stripped of user
// information and query.
func TestSourcesReport(t *testing.T) {
	ca := newCA(t, "sm2")
	clk := newClock()
	revoked := ca.client(t, "revoked", "")
	der := ca.crl(t, 1, clk.Now().Add(-time.Hour), clk.Now().Add(2*time.Hour), revoked.SerialNumber)
	file := filepath.Join(t.TempDir(), "ca.crl")
	if err := os.WriteFile(file, der, 0o600); err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	crls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write(der)
	}))
	defer crls.Close()
	secretURL := strings.Replace(crls.URL, "http://", "http://user:pa55word@", 1) + "/ca.crl?token=s3cret#frag"
	resp := newResponder(t, ca)
	responder := resp.srv.URL + "/ocsp?key=s3cret"
	chk, err := New(Options{
		CRL:  &CRLOptions{Sources: []string{file, secretURL}, Issuers: []*smx509.Certificate{ca.cert}, Grace: 30 * time.Minute},
		OCSP: &OCSPOptions{Responder: responder},
		Now:  clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := chk.Sources()
	if len(rs) != 3 || rs[0].State != "expired" || !rs[0].LastFetch.IsZero() || rs[2].Kind != "ocsp" || rs[2].State != "not_asked" {
		t.Fatalf("before any read: %+v", rs)
	}
	if err := chk.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs = chk.Sources()
	for _, r := range rs[:2] {
		if r.Kind != "crl" || r.State != "ok" || r.Revoked != 1 || !r.NextUpdate.Equal(clk.Now().Add(2*time.Hour).Truncate(time.Second)) ||
			!r.LastFetch.Equal(clk.Now()) || !r.LastSuccess.Equal(clk.Now()) || r.LastError != "" {
			t.Errorf("loaded CRL source: %+v", r)
		}
	}
	if rs[0].Source != file || rs[1].Source != crls.URL+"/ca.crl" {
		t.Errorf("sources named %q, %q", rs[0].Source, rs[1].Source)
	}

	down.Store(true)
	clk.advance(time.Minute)
	_ = chk.Refresh(context.Background())
	if r := chk.Sources()[1]; r.State != "failing" || !r.LastFetch.Equal(clk.Now()) || r.LastSuccess.Equal(r.LastFetch) || !strings.Contains(r.LastError, "503") {
		t.Errorf("failing CRL URL: %+v", r)
	}
	clk.advance(2 * time.Hour)
	if r := chk.Sources()[1]; r.State != "stale" {
		t.Errorf("past nextUpdate: %+v", r)
	}
	clk.advance(time.Hour)
	if r := chk.Sources()[1]; r.State != "expired" {
		t.Errorf("past the grace: %+v", r)
	}

	// The responder is asked once a certificate is checked.
	good := ca.client(t, "good", "")
	now := clk.Now()
	resp.set(good.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now.Add(-time.Minute), nextUpdate: now.Add(time.Hour)})
	chk.ocsp.Check(context.Background(), good, ca.cert)
	rs = chk.Sources()
	if len(rs) != 3 || rs[2].State != "ok" || rs[2].Source != resp.srv.URL+"/ocsp" || rs[2].LastFetch.IsZero() || !rs[2].LastSuccess.Equal(rs[2].LastFetch) {
		t.Errorf("OCSP responder after an answer: %+v", rs[2])
	}
	for _, r := range rs {
		for _, secret := range []string{"pa55word", "s3cret", "frag", "user"} {
			if strings.Contains(r.Source+r.LastError, secret) {
				t.Errorf("report %+v shows %q", r, secret)
			}
		}
	}
}

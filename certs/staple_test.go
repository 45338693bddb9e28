package certs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/internal/testocsp"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/ocsp"
)

// stapleStore is a store of one TLS source made of leaf, with stapling
// as asked, sharing stapler.
func stapleStore(t *testing.T, stapler *Stapler, leaf *testocsp.Leaf, staple bool) *Store {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, leaf.ChainPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stapler: stapler},
		Source{Name: "site", TLS: &TLSFiles{Cert: cert, Key: key, OCSPStapling: staple}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stapleState(t *testing.T, s *Store, state string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gmgate_ocsp_staple_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func TestStapleGoodKeptAcrossStores(t *testing.T) {
	ca := testocsp.New(t)
	leaf := ca.Issue(t, "staple.example.cn")
	stapler := NewStapler(StaplerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer stapler.Close()

	s := stapleStore(t, stapler, leaf, true)
	testwait.For(t, "a stapled response", func() bool { return len(s.TLSCertificate("site").OCSPStaple) > 0 })
	resp, err := ocsp.ParseResponseForCert(s.TLSCertificate("site").OCSPStaple, leaf.Cert, ca.Cert)
	if err != nil || resp.Status != ocsp.Good {
		t.Fatalf("staple: %v, %+v", err, resp)
	}
	if got := stapleState(t, s, StapleGood); got != 1 {
		t.Errorf("gmgate_ocsp_staple_state{state=good} = %v", got)
	}
	if n, err := testutil.GatherAndCount(regOf(s), "gmgate_ocsp_staple_next_update_timestamp_seconds"); err != nil || n != 1 {
		t.Errorf("next update series: %d, %v", n, err)
	}

	// A reload (a new store of the same certificate, then the old one
	// closed) keeps the response and does not ask again.
	asked := ca.Requests()
	s2 := stapleStore(t, stapler, leaf, true)
	s.Close()
	if len(s2.TLSCertificate("site").OCSPStaple) == 0 {
		t.Error("the new store of the same certificate has no staple")
	}
	if ca.Requests() != asked {
		t.Errorf("the responder was asked %d more times for an unchanged certificate", ca.Requests()-asked)
	}
	s2.Close()
	if n := len(stapler.records); n != 0 {
		t.Errorf("%d records left after every store closed", n)
	}
}

func regOf(c prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

func TestStapleNeverRevokedOrFailed(t *testing.T) {
	ca := testocsp.New(t)
	stapler := NewStapler(StaplerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer stapler.Close()

	revoked := ca.Issue(t, "revoked.example.cn")
	ca.Revoke(revoked.Cert.SerialNumber)
	s := stapleStore(t, stapler, revoked, true)
	defer s.Close()
	testwait.For(t, "the revoked state", func() bool { return stapleState(t, s, StapleRevoked) == 1 })
	if len(s.TLSCertificate("site").OCSPStaple) != 0 {
		t.Error("a revoked answer was stapled")
	}

	ca.SetDown(true)
	down := ca.Issue(t, "down.example.cn")
	s2 := stapleStore(t, stapler, down, true)
	defer s2.Close()
	testwait.For(t, "the failed state", func() bool { return stapleState(t, s2, StapleFailed) == 1 })
	if len(s2.TLSCertificate("site").OCSPStaple) != 0 {
		t.Error("something was stapled while the responder was down")
	}

	// Stapling off: the responder is never asked.
	ca.SetDown(false)
	asked := ca.Requests()
	off := stapleStore(t, stapler, ca.Issue(t, "off.example.cn"), false)
	defer off.Close()
	if got := stapleState(t, off, StaplePending); got != -1 || ca.Requests() != asked {
		t.Errorf("stapling off: state series %v, %d requests", got, ca.Requests()-asked)
	}
}

// TLCP: the signing certificate of an SM2 pair gets the SM2-signed
// answer of its CA's responder.
func TestStapleTLCP(t *testing.T) {
	ca := testocsp.NewSM2(t)
	pair := ca.IssueTLCP(t, "tlcp.example.cn")
	dir := t.TempDir()
	files := map[string][]byte{"sign.crt": pair.SignPEM, "sign.key": pair.SignKeyPEM, "enc.crt": pair.EncPEM, "enc.key": pair.EncKeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stapler := NewStapler(StaplerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer stapler.Close()
	s, err := NewStore(StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stapler: stapler},
		Source{Name: "site", TLCP: &TLCPFiles{SignCert: filepath.Join(dir, "sign.crt"), SignKey: filepath.Join(dir, "sign.key"),
			EncCert: filepath.Join(dir, "enc.crt"), EncKey: filepath.Join(dir, "enc.key"), OCSPStapling: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testwait.For(t, "a stapled response", func() bool { return len(s.TLCPCertificate("site").OCSPStaple) > 0 })
	if got := stapleState(t, s, StapleGood); got != 1 {
		t.Errorf("gmgate_ocsp_staple_state{role=sign,state=good} = %v", got)
	}
	c, err := s.GetTLCPCertificate(nil)
	if err != nil || len(c.OCSPStaple) == 0 {
		t.Errorf("GetTLCPCertificate: %v, staple of %d bytes", err, len(c.OCSPStaple))
	}
}

func TestStapleRefreshSchedule(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		this, next time.Duration // relative to now
		want       time.Duration
	}{
		{-time.Minute, 2*time.Hour - time.Minute, time.Hour - time.Minute}, // fresh: half its validity
		{-72 * time.Hour, 24 * time.Hour, 12 * time.Hour},                  // made long ago: halfway to nextUpdate
		{-time.Minute, time.Minute, time.Minute},                           // short-lived: not more than once a minute
	} {
		st := &revocation.Staple{ThisUpdate: now.Add(tc.this), NextUpdate: now.Add(tc.next)}
		if got := nextRefresh(st, now).Sub(now); got != tc.want {
			t.Errorf("thisUpdate %v, nextUpdate %v: refresh in %v, want %v", tc.this, tc.next, got, tc.want)
		}
	}
}

package acme

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testacme"
	"github.com/gmgate/gmgate/internal/testwait"
	"golang.org/x/crypto/ocsp"
)

// ACME certificates get certmagic's OCSP stapling when their CA names a
// responder, and none with DisableOCSPStapling (tls.ocsp_stapling:
// false).
func TestACMEStaplesOCSP(t *testing.T) {
	pebble, challengeLn, opts := pebbleHTTP01With(t, testacme.NewWithOCSP(t))
	// One challenge server for the managers made one after the other.
	var current atomic.Pointer[Manager]
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current.Load().HTTPChallengeHandler(http.NotFoundHandler()).ServeHTTP(w, r)
	})}
	go srv.Serve(challengeLn)
	t.Cleanup(func() { srv.Close() })

	// The manager without stapling goes first: once the second has
	// stapled, the first has had longer to do so had it been on.
	staples := map[bool]func() []byte{}
	for _, disable := range []bool{true, false} {
		opts.StateDir = t.TempDir()
		opts.DisableOCSPStapling = disable
		a, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Stop)
		current.Store(a)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = a.Manage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("ACME issuance: %v", err)
		}
		if n := pebble.OCSPRequests(); disable && n != 0 {
			t.Errorf("the manager without stapling asked the responder %d times", n)
		}
		staples[disable] = func() []byte {
			c, err := a.GetCertificate(&tls.ClientHelloInfo{ServerName: acmeTestDomain})
			if err != nil {
				t.Fatal(err)
			}
			return c.OCSPStaple
		}
	}
	testwait.For(t, "certmagic to staple the response", func() bool { return len(staples[false]()) > 0 })
	resp, err := ocsp.ParseResponse(staples[false](), nil)
	if err != nil || resp.Status != ocsp.Good {
		t.Fatalf("staple: %v, %+v", err, resp)
	}
	if got := staples[true](); got != nil {
		t.Errorf("DisableOCSPStapling: a staple of %d bytes", len(got))
	}
}

package revocation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// gatedResponder is a responder whose answers wait for release: each
// request says it arrived, then blocks until the test lets it go.
type gatedResponder struct {
	*responder
	url     string
	arrived chan struct{}
	release chan struct{}
}

func newGatedResponder(t *testing.T, ca *testCA) *gatedResponder {
	g := &gatedResponder{responder: newResponder(t, ca), arrived: make(chan struct{}, 16), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		g.arrived <- struct{}{}
		select {
		case <-g.release:
		case <-req.Context().Done():
			return
		}
		g.serve(w, req)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// A check whose context ends (its client went away, its handshake timed
// out) answers unknown for itself alone: the others waiting for the
// same answer, and those that come after, get the responder's answer,
// not a failure it never had.
func TestOCSPCancelledCheckFailsNoOther(t *testing.T) {
	ca := newCA(t, "sm2")
	g := newGatedResponder(t, ca)
	leaf := ca.client(t, "c", g.url)
	now := time.Now()
	g.set(leaf.SerialNumber, ocspAnswer{status: StatusGood, thisUpdate: now.Add(-time.Minute), nextUpdate: now.Add(time.Hour)})
	rec := &recorder{}
	o, err := NewOCSPChecker(OCSPOptions{Observer: rec, Retry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	check := func(ctx context.Context) <-chan Result {
		ch := make(chan Result, 1)
		go func() { ch <- o.Check(ctx, leaf, ca.cert) }()
		return ch
	}

	t.Run("waiter", func(t *testing.T) {
		first := check(context.Background())
		<-g.arrived // the first check is asking
		ctx, cancel := context.WithCancel(context.Background())
		waiter := check(ctx)
		cancel()
		if r := <-waiter; r.Status != StatusUnknown {
			t.Errorf("cancelled waiter: %v, want unknown", r)
		}
		// A check after the cancelled one waits for the answer too.
		later := check(context.Background())
		close(g.release)
		for _, ch := range []<-chan Result{first, later} {
			if r := <-ch; r.Status != StatusGood {
				t.Errorf("%v, want good", r)
			}
		}
	})
	g.release = make(chan struct{})

	t.Run("asker", func(t *testing.T) {
		leaf2 := ca.client(t, "d", g.url)
		g.set(leaf2.SerialNumber, ocspAnswer{status: StatusRevoked, revokedAt: now.Add(-time.Hour), thisUpdate: now.Add(-time.Minute), nextUpdate: now.Add(time.Hour)})
		ctx, cancel := context.WithCancel(context.Background())
		asker := make(chan Result, 1)
		go func() { asker <- o.Check(ctx, leaf2, ca.cert) }()
		<-g.arrived
		cancel()
		if r := <-asker; r.Status != StatusUnknown {
			t.Errorf("cancelled asker: %v, want unknown", r)
		}
		// The responder did not fail: the next check asks it (within
		// the hour of Retry a remembered failure would forbid that).
		close(g.release)
		if r := o.Check(context.Background(), leaf2, ca.cert); r.Status != StatusRevoked {
			t.Errorf("after a cancelled asker: %v, want revoked", r)
		}
	})
	for _, s := range rec.states {
		if s != "OCSP "+g.url+" ok" {
			t.Errorf("the responder was reported %q", s)
		}
	}
}

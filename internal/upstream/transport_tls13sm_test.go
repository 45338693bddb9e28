package upstream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// A ticket is offered only under the target and client identity it was
// kept for, and not past the configured lifetime.
func TestTicketShelf(t *testing.T) {
	s := newTicketShelf(4, time.Hour)
	a, b := s.shelf("10.0.0.1:443 tagA"), s.shelf("10.0.0.1:443 tagB")
	ticket := &tls13.ClientSessionState{}
	a.Put("localhost", ticket)
	if got, ok := a.Get("localhost"); !ok || got != ticket {
		t.Fatal("the ticket is not offered again under its own identity")
	}
	if _, ok := b.Get("localhost"); ok {
		t.Error("a ticket made for one client identity is offered under another")
	}
	if _, ok := s.shelf("10.0.0.2:443 tagA").Get("localhost"); ok {
		t.Error("a ticket of one target is offered to another")
	}
	a.Put("localhost", nil)
	if _, ok := a.Get("localhost"); ok {
		t.Error("a removed ticket is still offered")
	}

	clock := time.Now()
	aging := newTicketShelf(4, time.Hour)
	aging.now = func() time.Time { return clock }
	e := aging.shelf("t")
	e.Put("localhost", ticket)
	clock = clock.Add(59 * time.Minute)
	if _, ok := e.Get("localhost"); !ok {
		t.Error("a ticket within session_cache.lifetime is not offered")
	}
	clock = clock.Add(2 * time.Minute)
	if _, ok := e.Get("localhost"); ok {
		t.Error("a ticket past session_cache.lifetime is offered")
	}

	// The times of tickets the LRU dropped do not pile up.
	for i := range 100 {
		s.shelf(fmt.Sprint("target", i)).Put("localhost", ticket)
	}
	if n := len(s.stored); n > 2*s.capacity+1 {
		t.Errorf("%d ticket times kept for a cache of %d", n, s.capacity)
	}
}

// A TLS 1.3 alert is named in the failure label as a TLCP one is.
func TestFailureTLS13Alert(t *testing.T) {
	err := &stageError{stage: stageHandshake, proto: "TLS 1.3 ShangMi", err: &tls13.AlertError{Alert: tls13.AlertCertificateRequired, Remote: true}}
	stage, reason := Failure(err)
	if stage != stageHandshake || reason != "alert_received_certificate_required" {
		t.Errorf("Failure = %q, %q", stage, reason)
	}
	if got := err.Error(); got != "TLS 1.3 ShangMi handshake failed: tls13: remote error: certificate required" {
		t.Errorf("error %q", got)
	}
	var ae *tls13.AlertError
	if !errors.As(err, &ae) {
		t.Error("the alert does not unwrap")
	}
}

// A target's certificate that did not verify is explained with the
// settings of its own scheme.
func TestFailureHintNamesTheScheme(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&stageError{stage: stageHandshake, proto: protoTLS13SM, err: &tls13.AlertError{Alert: tls13.AlertBadCertificate}}, "check tls13sm.ca and tls13sm.server_name"},
		{&stageError{stage: stageHandshake, err: &tlcp.AlertError{Alert: tlcp.AlertBadCertificate}}, "check tlcp.ca and tlcp.server_name"},
		{&stageError{stage: stageHandshake, proto: protoTLS13SM, err: &tls13.AlertError{Alert: tls13.AlertHandshakeFailure, Remote: true}}, "tls13sm.suites and tls13sm.groups"},
		{&stageError{stage: stageHandshake, proto: protoTLS13SM, err: &tls13.AlertError{Alert: tls13.AlertProtocolVersion, Remote: true}}, "refused TLS 1.3"},
	} {
		if got := FailureHint(c.err); !strings.Contains(got, c.want) {
			t.Errorf("FailureHint(%v) = %q, want it to say %q", c.err, got, c.want)
		}
	}
}

package upstream

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/testlog"
	"github.com/gmgate/gmgate/internal/tlcphint"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// With profile auto a target starts with standard, moves to gmssl when
// it refuses standard's answer to its CertificateRequest, keeps gmssl
// while it works (said once), and starts over once every profile was
// refused; a configured profile is never changed.
func TestTargetProfiles(t *testing.T) {
	var logs testlog.Buffer
	p := &Pool{Name: "partner", log: slog.New(slog.NewTextHandler(&logs, nil)), metrics: observe.NewMetrics()}
	targets := []*Target{{Addr: "10.0.0.1:443"}}
	gauge := func(profile string) float64 {
		return testutil.ToFloat64(p.metrics.UpstreamTLCPProfile.WithLabelValues("partner", "10.0.0.1:443", profile))
	}
	refused := &tlcp.AlertError{Alert: tlcp.AlertBadCertificate, Remote: true}
	asked := tlcphint.Facts{ServerCertificates: true, CertificateRequested: true, ClientCert: true}

	tp := newTargetProfiles(p, "auto", targets)
	addr := targets[0].Addr
	if got := tp.first(addr); got != tlcp.ProfileStandard {
		t.Fatalf("first try %q", got)
	}
	if got := tp.retry(tlcp.ProfileStandard, refused, asked); got != tlcp.ProfileGmSSL {
		t.Fatalf("after standard was refused: %q", got)
	}
	if got := tp.retry(tlcp.ProfileStandard, refused, tlcphint.Facts{ServerCertificates: true}); got != "" {
		t.Fatalf("a refusal without a CertificateRequest is retried with %q", got)
	}
	if got := tp.retry(tlcp.ProfileStandard, errors.New("x509: unknown authority"), asked); got != "" {
		t.Fatalf("a local error is retried with %q", got)
	}
	tp.took(addr, tlcp.ProfileGmSSL)
	tp.took(addr, tlcp.ProfileGmSSL)
	if got := tp.first(addr); got != tlcp.ProfileGmSSL {
		t.Fatalf("remembered %q", got)
	}
	if n := strings.Count(logs.String(), "takes TLCP client profile gmssl"); n != 1 {
		t.Fatalf("said %d times:\n%s", n, logs.String())
	}
	if gauge("gmssl") != 1 || gauge("standard") != 0 {
		t.Fatalf("gauge gmssl %v, standard %v", gauge("gmssl"), gauge("standard"))
	}
	tp.refused(addr)
	if got := tp.first(addr); got != tlcp.ProfileStandard || gauge("gmssl") != 0 {
		t.Fatalf("after both were refused: first %q, gauge gmssl %v", got, gauge("gmssl"))
	}

	fixed := newTargetProfiles(p, "gmssl", targets)
	if fixed.first(addr) != tlcp.ProfileGmSSL || fixed.retry(tlcp.ProfileGmSSL, refused, asked) != "" || gauge("gmssl") != 1 {
		t.Fatal("a configured profile moved")
	}
}

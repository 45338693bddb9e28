package upstream

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/testlog"
)

// refusedAddr is a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// newTestPool makes a pool of targets whose DEBUG lines go to logs.
func newTestPool(t *testing.T, logs *testlog.Buffer, retries int, targets ...string) *Pool {
	t.Helper()
	uc := &config.Upstream{Targets: targets, Retries: &retries}
	timeouts := config.Timeouts{UpstreamConnect: config.Duration(5 * time.Second)}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := NewPool("app", uc, timeouts, 1<<20, nil, false, log, observe.NewMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A retry is announced only when another target is there to take it: a
// pool of one target fails without saying it retries, a pool of two
// says it once, naming the target it moves to.
func TestRetryAnnouncedOnlyWithAnotherTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets int
		want    int
	}{
		{"one target", 1, 0},
		{"two targets", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var targets []string
			for range tc.targets {
				targets = append(targets, "http://"+refusedAddr(t))
			}
			var logs testlog.Buffer
			p := newTestPool(t, &logs, 3, targets...)
			req, _ := http.NewRequest(http.MethodGet, "http://app.example/", nil)
			if _, err := p.RoundTrip(req); err == nil {
				t.Fatal("a request to refusing targets succeeded")
			}
			got := strings.Count(logs.String(), "retrying on another target")
			if got != tc.want {
				t.Fatalf("%d retry lines, want %d:\n%s", got, tc.want, logs.String())
			}
			if tc.want > 0 && !strings.Contains(logs.String(), "next=") {
				t.Fatalf("the retry line does not name the next target:\n%s", logs.String())
			}
		})
	}
}

package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testkeys"
)

// restartWarnings are the warnings about settings that wait for a
// restart in log lines, as "message running=value [listeners=names]".
func restartWarnings(t *testing.T, logs string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "restart") {
			w := fmt.Sprintf("%s running=%v", msg, rec["running"])
			if l, ok := rec["listeners"]; ok {
				w += fmt.Sprintf(" listeners=%v", l)
			}
			out = append(out, w)
		}
	}
	return out
}

// The settings a reload does not apply are warned about at every reload
// whose file differs from what the process runs, naming the value in
// service; a file that goes back to it is not warned about.
func TestReloadWarnsOfSettingsThatWaitForRestart(t *testing.T) {
	doc := tcpListenerDoc
	running := doc("127.0.0.1:0", "off", "")
	moved := doc("127.0.0.1:1", "stderr", "")
	s, logs := startLogged(t, parseConfig(t, running), nil)
	reload := func(doc string) []string {
		t.Helper()
		from := len(logs.String())
		if err := s.Reload(parseConfig(t, doc)); err != nil {
			t.Fatal(err)
		}
		return restartWarnings(t, logs.String()[from:])
	}
	both := []string{
		"admin.listen changes take effect on restart running=127.0.0.1:0",
		"log.access changes take effect on restart running=off",
	}
	for i, step := range []struct {
		doc  string
		want []string
	}{
		{moved, both},
		{running, nil},
		{moved, both},
		{moved, both},
		{doc("127.0.0.1:0", "off", "timeouts: {read_header: 3s, idle: 7s}\nlimits: {max_header_bytes: 1000}\n"), []string{
			"timeouts.read_header changes take effect on restart for the listeners a reload keeps running=10s listeners=app",
			"timeouts.idle changes take effect on restart for HTTP keep-alive and HTTP/2 writes on the listeners a reload keeps running=2m0s listeners=app",
			"limits.max_header_bytes changes take effect on restart for the listeners a reload keeps running=65536 listeners=app",
		}},
		{running, nil},
	} {
		got := reload(step.doc)
		if strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Errorf("reload %d warned\n%s\nwant\n%s", i+1, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}
}

// trackedConfig serves TLCP with both keys of the tracked key scheme
// (internal/testkeys); a replaced certificate's keys close after timeout.
func trackedConfig(p *testPKI, timeout time.Duration) *config.Config {
	cfg := testConfig(p, "http://127.0.0.1:1")
	cfg.Listeners[0].TLCP.SignKey = testkeys.Scheme + ":" + p.dual.SignKey
	cfg.Listeners[0].TLCP.EncKey = testkeys.Scheme + ":" + p.dual.EncKey
	cfg.Timeouts.Handshake = config.Duration(timeout / 2)
	cfg.Timeouts.UpstreamConnect = config.Duration(timeout / 4)
	return cfg
}

func wantClosed(t *testing.T, what string, keys []*testkeys.Key, closed bool) {
	t.Helper()
	for i, k := range keys {
		if k.IsClosed() != closed {
			t.Errorf("%s key %d: closed %v, want %v", what, i, k.IsClosed(), closed)
		}
	}
}

// A configuration reload opens the keys again (the same references) and
// closes those of the certificates it replaced once a handshake that
// chose them would be over (timeouts.handshake); the keys in service stay
// open and serve.
func TestReloadClosesReplacedKeys(t *testing.T) {
	p := getPKI(t)
	keys := testkeys.Since()
	cfg := trackedConfig(p, 2*time.Second)
	s := startServer(t, cfg, nil)
	mustServeTLCP(t, p, s)
	old := keys()
	if len(old) != 2 {
		t.Fatalf("%d keys opened, want 2", len(old))
	}
	if err := s.Reload(trackedConfig(p, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	inService := keys()[2:]
	if len(inService) != 2 {
		t.Fatalf("the reload opened %d keys, want 2", len(inService))
	}
	for _, k := range old {
		select {
		case <-k.Closed():
		case <-time.After(10 * time.Second):
			t.Fatal("the keys of the replaced certificates were not closed")
		}
	}
	wantClosed(t, "in service", inService, false)
	mustServeTLCP(t, p, s)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, "in service at shutdown", inService, true)
}

// Within timeouts.handshake of a reload the replaced keys stay open for
// the handshakes that chose them; shutdown closes them with the keys in
// service once the connections are done.
func TestShutdownClosesReplacedKeys(t *testing.T) {
	p := getPKI(t)
	keys := testkeys.Since()
	s := startServer(t, trackedConfig(p, time.Minute), nil)
	if err := s.Reload(trackedConfig(p, time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, "replaced", keys()[:2], false)
	mustServeTLCP(t, p, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	all := keys()
	if len(all) != 4 {
		t.Fatalf("%d keys opened, want 4", len(all))
	}
	wantClosed(t, "after shutdown", all, true)
}

// A reload that fails after loading the certificates (here, a new
// listener's address is taken) closes the keys it opened at once; the keys
// in service stay open.
func TestFailedReloadClosesItsKeys(t *testing.T) {
	p := getPKI(t)
	keys := testkeys.Since()
	s := startServer(t, trackedConfig(p, time.Minute), nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	next := trackedConfig(p, time.Minute)
	extra := next.Listeners[0]
	extra.Name, extra.Listen = "extra", taken.Addr().String()
	next.Listeners = append(next.Listeners, extra)
	config.Defaults(next)
	if err := s.Reload(next); err == nil {
		t.Fatal("a reload onto a taken address succeeded")
	}
	all := keys()
	if len(all) < 4 {
		t.Fatalf("%d keys opened, want the reload's too", len(all))
	}
	wantClosed(t, "in service", all[:2], false)
	wantClosed(t, "of the failed reload", all[2:], true)
	mustServeTLCP(t, p, s)
}

// The keys a reload replaced stay open while a replaced generation's
// tlcp:// pool may still present them: a client's handshake, then an
// upstream connect and one retry (timeouts.handshake plus twice
// timeouts.upstream_connect), not only the longer of the two.
func TestReplacedKeysOutlastUpstreamRetries(t *testing.T) {
	p := getPKI(t)
	keys := testkeys.Since()
	cfg := trackedConfig(p, time.Second)
	cfg.Timeouts.Handshake = config.Duration(time.Second)
	cfg.Timeouts.UpstreamConnect = config.Duration(time.Second)
	s := startServer(t, cfg, nil)
	next := trackedConfig(p, time.Second)
	next.Timeouts = cfg.Timeouts
	reloaded := time.Now()
	if err := s.Reload(next); err != nil {
		t.Fatal(err)
	}
	old := keys()[:2]
	// The keys must outlast the retries: the passing of time is what is
	// tested.
	time.Sleep(time.Until(reloaded.Add(1500 * time.Millisecond)))
	wantClosed(t, "replaced, 1.5 s after the reload", old, false)
	for _, k := range old {
		select {
		case <-k.Closed():
		case <-time.After(10 * time.Second):
			t.Fatal("the keys of the replaced certificates were not closed")
		}
	}
	if d := time.Since(reloaded); d < 3*time.Second {
		t.Errorf("the replaced keys closed %v after the reload, before 1 s + 2 × 1 s", d.Round(time.Millisecond))
	}
}

// A tlcp:// upstream with a client certificate and more retries tries
// as many more targets, each within timeouts.upstream_connect, for a
// request begun before a reload: the replaced keys stay open for all of
// those connects (timeouts.handshake plus, here, four times
// timeouts.upstream_connect).
func TestReplacedKeysOutlastEveryRetry(t *testing.T) {
	p := getPKI(t)
	keys := testkeys.Since()
	cfg := trackedConfig(p, time.Second)
	cfg.Timeouts.Handshake = config.Duration(500 * time.Millisecond)
	cfg.Timeouts.UpstreamConnect = config.Duration(500 * time.Millisecond)
	retries := 3
	cfg.Upstreams["partner"] = &config.Upstream{
		Targets: []string{"tlcp://127.0.0.1:1"},
		Retries: &retries,
		TLCP:    &config.UpstreamTLCP{SignCert: p.dual.SignCert, SignKey: testkeys.Scheme + ":" + p.dual.SignKey},
	}
	config.Defaults(cfg)
	s := startServer(t, cfg, nil)
	old := keys()
	if len(old) != 3 {
		t.Fatalf("%d keys opened, want 3", len(old))
	}
	reloaded := time.Now()
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	for _, k := range old {
		select {
		case <-k.Closed():
		case <-time.After(10 * time.Second):
			t.Fatal("the keys of the replaced certificates were not closed")
		}
	}
	if d := time.Since(reloaded); d < 2500*time.Millisecond {
		t.Errorf("the replaced keys closed %v after the reload, before 0.5 s + (1 + 3 retries) × 0.5 s", d.Round(time.Millisecond))
	}
}

package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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

package bench

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/tlcp/tls13"
)

// hybridUsable reports whether tls13 offers curveSM2MLKEM768 on this CPU:
// a client offered it alone refuses to start a handshake when it does not.
func hybridUsable() bool {
	a, b := net.Pipe()
	b.Close()
	defer a.Close()
	err := tls13.Client(a, &tls13.Config{InsecureSkipVerify: true, CurvePreferences: []tls13.CurveID{tls13.CurveSM2MLKEM768}}).Handshake()
	return err == nil || !strings.Contains(err.Error(), "no supported group")
}

// The TLS 1.3 ShangMi rows run against the self-started server, full and
// resumed, with curveSM2 and the hybrid, beside a TLCP row, and each has
// handshakes and a per server CPU-second figure.
func TestHandshakeTLS13SM(t *testing.T) {
	suites := "ECDHE_SM4_GCM_SM3,TLS1.3-SM,TLS1.3-SM+resumed,TLS1.3-SM-MLKEM,TLS1.3-SM-MLKEM+resumed"
	hybrid := hybridUsable()
	if !hybrid {
		// An ARMv8.0 core, where tls13 leaves the hybrid out.
		suites = "ECDHE_SM4_GCM_SM3,TLS1.3-SM,TLS1.3-SM+resumed"
	}
	opts := quickOptions(t, suites)
	rep, err := RunHandshake(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, negotiated string
		resumed          bool
	}{
		{"ECDHE_SM4_GCM_SM3", "ECDHE_SM4_GCM_SM3", false},
		{"TLS1.3-SM curveSM2", "TLS1.3-SM curveSM2", false},
		{"TLS1.3-SM curveSM2 resumed", "TLS1.3-SM curveSM2", true},
		{"TLS1.3-SM curveSM2MLKEM768", "TLS1.3-SM curveSM2MLKEM768", false},
		{"TLS1.3-SM curveSM2MLKEM768 resumed", "TLS1.3-SM curveSM2MLKEM768", true},
	}
	if !hybrid {
		want = want[:3]
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results for %d scenarios", len(rep.Results), len(want))
	}
	for i, w := range want {
		res := rep.Results[i]
		checkConsistent(t, res, opts.Concurrency)
		if res.Name != w.name || res.ErrorCount != 0 {
			t.Errorf("result %d: %q with errors %v, want %q without", i, res.Name, res.Errors, w.name)
		}
		if res.ServerCPUSeconds <= 0 || res.HandshakesPerServerCPUSecond <= 0 {
			t.Errorf("%s: no server CPU figure: %+v", res.Name, res)
		}
		// Every connection but each worker's first can resume: the first
		// ones of the warm-up bring the tickets.
		if w.resumed && (res.Resumed == 0 || res.Negotiated[w.negotiated+" (resumed)"] != res.Resumed) ||
			!w.resumed && (res.Resumed != 0 || res.Negotiated[w.negotiated] != res.FullHandshakes) {
			t.Errorf("%s: %d full, %d resumed, negotiated %v", res.Name, res.FullHandshakes, res.Resumed, res.Negotiated)
		}
	}
	var table bytes.Buffer
	WriteHandshakeTable(&table, rep)
	for _, w := range want {
		if !strings.Contains(table.String(), w.name) {
			t.Errorf("table lacks %q:\n%s", w.name, table.String())
		}
	}
}

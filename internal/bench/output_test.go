package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A chart that cannot be written costs the chart, not the report: the
// table is written first.
func TestOutputWritesTheTableWhenTheChartFails(t *testing.T) {
	rep, err := RunCrypto(context.Background(), CryptoOptions{
		Duration: 3 * time.Millisecond, Warmup: time.Millisecond, Sizes: []int{16}, CPU: -1, Only: []string{"sha-256"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Output{Chart: filepath.Join(t.TempDir(), "gone", "c.svg")}.Write(&out, rep)
	if err == nil {
		t.Fatal("a chart in a directory that does not exist was written")
	}
	if !strings.Contains(out.String(), "SHA-256") {
		t.Errorf("the table was not written:\n%s", out.String())
	}
}

// A chart file is checked before anything is measured: its name says
// what it holds, and its directory is there.
func TestOutputCheck(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ chart, want string }{
		{"", ""},
		{filepath.Join(dir, "c.svg"), ""},
		{filepath.Join(dir, "c.HTML"), ""},
		{filepath.Join(dir, "c.htm"), ""},
		{filepath.Join(dir, "c.png"), `--chart ` + filepath.Join(dir, "c.png") + `: a chart is an SVG image (.svg) or an HTML page with the table (.html)`},
		{filepath.Join(dir, "c"), `a chart is an SVG image (.svg)`},
		{filepath.Join(dir, "gone", "c.svg"), `--chart ` + filepath.Join(dir, "gone", "c.svg") + `: directory ` + filepath.Join(dir, "gone") + ` does not exist`},
		{filepath.Join(dir, "file", "c.svg"), `is not a directory`},
	} {
		err := Output{Chart: c.chart}.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.chart, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.chart, err, c.want)
		}
	}
}

package proxy

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/acme"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descRE      = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", .*variableLabels: \{([^}]*)\}\}$`)
	docCodeRE   = regexp.MustCompile("`([^`]+)`")
	docParensRE = regexp.MustCompile(`\([^)]*\)`)
)

// servedMetrics returns the labels of every gmgate_ metric the process
// can serve: its own, the session store's, the certificate store's and
// ACME's.
func servedMetrics(t *testing.T) map[string][]string {
	m := observe.NewMetrics()
	m.StoreObserver()
	ch := make(chan *prometheus.Desc, 256)
	m.Registry.Describe(ch)
	(&certs.Store{}).Describe(ch)
	(&acme.Manager{}).Describe(ch)
	close(ch)
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		g := descRE.FindStringSubmatch(s)
		if g == nil {
			t.Fatalf("cannot read %s", s)
		}
		if !strings.HasPrefix(g[1], "gmgate_") {
			continue
		}
		var labels []string
		if g[2] != "" {
			labels = strings.Split(g[2], ",")
		}
		sort.Strings(labels)
		out[g[1]] = labels
	}
	return out
}

// documentedMetrics reads the metrics table of docs/operations.md: the
// names of each row and its labels (the code spans of the labels column
// outside parentheses, which hold their values).
func documentedMetrics(t *testing.T) map[string][]string {
	f, err := os.Open("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	inTable := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| metric | labels |") {
			inTable = true
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("docs/operations.md: a metrics row without labels and meaning: %s", line)
		}
		var labels []string
		for _, m := range docCodeRE.FindAllStringSubmatch(docParensRE.ReplaceAllString(cells[1], ""), -1) {
			labels = append(labels, m[1])
		}
		sort.Strings(labels)
		for _, m := range docCodeRE.FindAllStringSubmatch(cells[0], -1) {
			out[m[1]] = labels
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// docs/operations.md lists every gmgate_ metric the process serves, with
// its labels, and no other.
func TestMetricsDocMatchesServedMetrics(t *testing.T) {
	served, documented := servedMetrics(t), documentedMetrics(t)
	if len(documented) < 10 {
		t.Fatalf("only %d metrics read from docs/operations.md; is the table still headed | metric | labels |?", len(documented))
	}
	for name, labels := range served {
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s%v is served but not in the metrics table of docs/operations.md", name, labels)
		case !slices.Equal(doc, labels):
			t.Errorf("%s: docs/operations.md gives the labels %v, the process serves %v", name, doc, labels)
		}
	}
	for name := range documented {
		if _, ok := served[name]; !ok {
			t.Errorf("docs/operations.md documents %s, which the process does not serve", name)
		}
	}
}

// Every metric that README.md and the other docs name is served, with
// the labels they give it.
func TestMetricsNamedInDocsAreServed(t *testing.T) {
	served := servedMetrics(t)
	named := regexp.MustCompile(`gmgate_[a-z_]*[a-z](\{[^}]*\})?`)
	files := []string{"../README.md", "../docs/config.md", "../docs/operations.md", "../docs/bench.md", "../docs/keys.md", "../docs/certificates.md", "../docs/protocol.md"}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(data), -1) {
			name := strings.TrimSuffix(m[0], m[1])
			labels, ok := served[name]
			if !ok {
				t.Errorf("%s names %s, which the process does not serve", file, m[0])
				continue
			}
			if m[1] == "" {
				continue
			}
			for _, pair := range strings.Split(strings.Trim(m[1], "{}"), ",") {
				label, _, _ := strings.Cut(pair, "=")
				if !slices.Contains(labels, strings.TrimSpace(label)) {
					t.Errorf("%s names %s: %s has no label %q", file, m[0], name, label)
				}
			}
		}
	}
}

package config

import (
	"bufio"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// docSections maps the headings of docs/config.md whose table lists keys
// to the field path of the section they document. A table under any
// other heading fails the test, so that a new section is added here.
var docSections = map[string]string{
	"state_dir":           "",
	"admin":               "admin",
	"log":                 "log",
	"limits":              "limits",
	"timeouts":            "timeouts",
	"listeners":           "listeners",
	"sites":               "listeners.sites",
	"tlcp":                "listeners.tlcp",
	"tls":                 "listeners.tls",
	"client_revocation":   "listeners.tlcp.client_revocation",
	"tls.acme":            "listeners.tls.acme",
	"tls.sm2":             "listeners.tls.sm2",
	"proxy_protocol":      "listeners.proxy_protocol",
	"session_headers":     "listeners.session_headers",
	"routes":              "listeners.routes",
	"upstreams":           "upstreams.NAME",
	"upstreams.*.tls":     "upstreams.NAME.tls",
	"upstreams.*.tls13sm": "upstreams.NAME.tls13sm",
	"upstreams.*.tlcp":    "upstreams.NAME.tlcp",
	"upstreams.*.health":  "upstreams.NAME.health",
	"upstreams.*.passive": "upstreams.NAME.passive",
	"session_store":       "session_store",
}

// undocumentedKeys are keys the schema knows and the tables leave out,
// with the reason.
var undocumentedKeys = map[string]string{
	// Decoded only to be refused with its fix; the prose says so.
	"session_store.redis.password": "refused",
}

// docKey is one row of a key table of docs/config.md.
type docKey struct {
	path    string // full field path, "listeners.tlcp.session_cache.size"
	def     string // the default column, as written
	line    int
	section string
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// readDocKeys reads every key table of docs/config.md.
func readDocKeys(t *testing.T) (keys []docKey, headings []string) {
	t.Helper()
	f, err := os.Open("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	heading, inTable, n := "", false, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			heading = strings.TrimSpace(h)
			headings = append(headings, heading)
			inTable = false
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "key" {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(cells[0], "---") {
			continue
		}
		prefix, ok := docSections[heading]
		if !ok {
			t.Errorf("docs/config.md:%d: a key table under %q, a heading the test does not know; add it to docSections", n, heading)
			continue
		}
		def := ""
		if len(cells) > 1 {
			def = cells[1]
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(cells[0], -1) {
			p := m[1]
			if prefix != "" {
				p = prefix + "." + p
			}
			keys = append(keys, docKey{path: p, def: def, line: n, section: heading})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, headings
}

// schemaKeys lists the keys the schema accepts under path, going into a
// sub-section only where the documentation lists its keys with dots
// (session_cache.size) rather than under a heading of their own.
func schemaKeys(path string, documented map[string]bool) []string {
	var out []string
	for _, k := range knownFields(path) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		dotted := false
		for d := range documented {
			if strings.HasPrefix(d, p+".") && !documented[p] {
				dotted = true
				break
			}
		}
		if dotted {
			out = append(out, schemaKeys(p, documented)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// The key tables of docs/config.md list exactly the keys the schema
// accepts, and every top-level key has a section of its own.
func TestConfigDocListsEverySchemaKey(t *testing.T) {
	keys, headings := readDocKeys(t)
	documented := map[string]bool{}
	for _, k := range keys {
		if documented[k.path] {
			t.Errorf("docs/config.md:%d: %s is listed twice", k.line, k.path)
		}
		documented[k.path] = true
	}
	for k := range documented {
		if len(knownFields(parentPath(k))) == 0 || !slices.Contains(knownFields(parentPath(k)), k[strings.LastIndexByte(k, '.')+1:]) {
			t.Errorf("docs/config.md documents %s, which the schema does not accept", k)
		}
	}
	var missing []string
	sections := map[string]bool{"": true}
	for _, p := range docSections {
		sections[p] = true
	}
	for p := range sections {
		for _, k := range schemaKeys(p, documented) {
			if p == "" && k != "state_dir" {
				continue // the other top-level keys are sections
			}
			if !documented[k] && undocumentedKeys[k] == "" {
				missing = append(missing, k)
			}
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("the schema accepts %s, which no table of docs/config.md lists", k)
	}
	for _, k := range knownFields("") {
		if !slices.Contains(headings, k) {
			t.Errorf("docs/config.md has no section for the top-level key %s", k)
		}
	}
}

// defaultsExample is a configuration with every section present and
// nothing set, for Defaults to fill in.
func defaultsExample() *Config {
	c := &Config{
		Listeners: []Listener{{
			TLCP: &TLCP{ClientRevocation: &Revocation{}}, TLS: &TLS{ACME: &ACME{}, SM2: &TLSSM2{}}, ProxyProtocol: &ProxyProtocol{},
			Routes: []Route{{}},
		}, {
			Sites: []Site{{TLCP: &TLCP{}, TLS: &TLS{}, Routes: []Route{{}}}},
		}},
		Upstreams:    map[string]*Upstream{"NAME": {TLS: &UpstreamTLS{}, TLCP: &UpstreamTLCP{}, TLS13SM: &UpstreamTLS13SM{}}},
		SessionStore: &SessionStore{Redis: &Redis{}},
	}
	Defaults(c)
	return c
}

// valueAt returns the value at a field path of c ("listeners.tlcp.suites":
// that of the first listener that has a tlcp section), following
// pointers; false when no element has the path.
func valueAt(c *Config, path string) (reflect.Value, bool) {
	return valueIn(reflect.ValueOf(c), strings.Split(path, "."))
}

func valueIn(v reflect.Value, path []string) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	if len(path) == 0 {
		return v, true
	}
	switch v.Kind() {
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if got, ok := valueIn(v.Index(i), path); ok {
				return got, true
			}
		}
		return v, false
	case reflect.Map:
		e := v.MapIndex(reflect.ValueOf(path[0]))
		if !e.IsValid() {
			return v, false
		}
		return valueIn(e, path[1:])
	case reflect.Struct:
		f, ok := fieldByTag(v.Type(), path[0])
		if !ok {
			return v, false
		}
		return valueIn(v.FieldByIndex(f.Index), path[1:])
	}
	return v, false
}

// Every default that docs/config.md gives as one literal value is the
// value Defaults sets.
func TestConfigDocDefaults(t *testing.T) {
	keys, _ := readDocKeys(t)
	c := defaultsExample()
	literal := regexp.MustCompile("^`([^`]+)`$")
	checked := 0
	for _, k := range keys {
		m := literal.FindStringSubmatch(k.def)
		if m == nil || k.path == "listeners.name" { // listenerN: the index
			continue
		}
		got, ok := valueAt(c, k.path)
		if !ok {
			t.Errorf("docs/config.md:%d: %s: the documented default %s is not set", k.line, k.path, k.def)
			continue
		}
		want := reflect.New(got.Type())
		if err := yaml.Unmarshal([]byte(m[1]), want.Interface()); err != nil {
			if got.Kind() != reflect.String {
				t.Errorf("docs/config.md:%d: %s: default %s does not read as a %s: %v", k.line, k.path, k.def, got.Type(), err)
				continue
			}
			want.Elem().SetString(m[1])
		}
		if !reflect.DeepEqual(got.Interface(), want.Elem().Interface()) {
			t.Errorf("docs/config.md:%d: %s: documented default %s, Defaults sets %v", k.line, k.path, k.def, got.Interface())
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d literal defaults found in docs/config.md; is the table format still what the test reads?", checked)
	}
}

// yamlAt writes a document that sets the field at path (as in
// docs/config.md: a list's first element, the upstream NAME) to value.
func yamlAt(path, value string) (doc, problemPath string) {
	var b strings.Builder
	indent := ""
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		last := i == len(segs)-1
		problemPath += seg
		b.WriteString(indent + seg + ":")
		if last {
			b.WriteString(" " + value + "\n")
			break
		}
		b.WriteString("\n")
		indent += "  "
		if slices.Contains([]string{"listeners", "sites", "routes"}, seg) && !(seg == "routes" && last) {
			b.WriteString(indent + "-\n")
			indent += "  "
			problemPath += "[0]"
		}
		problemPath += "."
	}
	return b.String(), problemPath
}

// A value of the wrong kind for any documented key, and an unknown word
// for a key that takes one of a few, is one problem with the file, the
// line, the field and a fix.
func TestConfigDocKeysRefuseWrongValues(t *testing.T) {
	keys, _ := readDocKeys(t)
	c := defaultsExample()
	words := map[string]bool{
		"log.level": true, "listeners.protocol": true, "listeners.tlcp.suites": true,
		"listeners.tlcp.client_auth": true, "listeners.tls.client_auth": true,
		"listeners.tls.min_version": true, "listeners.tls.acme.challenges": true,
		"listeners.tls.acme.key_type": true, "upstreams.NAME.policy": true,
		"upstreams.NAME.tlcp.profile": true, "upstreams.NAME.tlcp.suites": true,
		"listeners.gm_capable_tls_clients": true, "listeners.sites.gm_capable_tls_clients": true,
	}
	durationType := reflect.TypeOf(Duration(0))
	for _, k := range keys {
		v, ok := valueAt(c, k.path)
		if !ok {
			// Sections left nil by Defaults: their type from the schema.
			f, found := schemaField(k.path)
			if !found {
				t.Errorf("%s: not in the schema", k.path)
				continue
			}
			v = reflect.New(deref(f.Type)).Elem()
		}
		var bad []string
		switch {
		case v.Type() == durationType:
			bad = []string{"five seconds", "{s: 5}"}
		case v.Kind() == reflect.Bool:
			bad = []string{"maybe"}
		case v.Kind() == reflect.Int:
			bad = []string{"many"}
		case v.Kind() == reflect.String && words[k.path]:
			bad = []string{"bogus", "{x: 1}"}
		case v.Kind() == reflect.String:
			bad = []string{"{x: 1}"}
		case v.Kind() == reflect.Slice && words[k.path]:
			bad = []string{"[bogus]", "{x: 1}"}
		case v.Kind() == reflect.Slice:
			bad = []string{"{x: 1}"}
		case v.Kind() == reflect.Struct || v.Kind() == reflect.Map:
			bad = []string{"oops", "[1]"}
		default:
			t.Errorf("%s: no wrong value for a %s", k.path, v.Type())
			continue
		}
		for _, value := range bad {
			doc, want := yamlAt(k.path, value)
			if words[k.path] && !strings.HasPrefix(value, "{") && v.Kind() == reflect.Slice {
				want += "[0]"
			}
			_, err := Parse("gmgate.yaml", []byte(doc))
			cerr, isConfig := err.(*Error)
			if !isConfig {
				t.Errorf("%s: %s: %v, want a configuration error", k.path, value, err)
				continue
			}
			var found *Problem
			for i, p := range cerr.Problems {
				if p.Path == want {
					found = &cerr.Problems[i]
					break
				}
			}
			if found == nil {
				t.Errorf("%s: %s: no problem at %s in\n%s\n%s", k.path, value, want, doc, err)
				continue
			}
			if found.File != "gmgate.yaml" || found.Line != strings.Count(doc, "\n") || found.Fix == "" {
				t.Errorf("%s: %s: problem %q lacks its file, line or fix", k.path, value, found.String())
			}
		}
	}
}

// schemaField returns the struct field at a documented path.
func schemaField(path string) (reflect.StructField, bool) {
	parent := reflect.TypeOf(Config{})
	var f reflect.StructField
	for _, seg := range strings.Split(path, ".") {
		parent = deref(parent)
		for parent.Kind() == reflect.Slice || parent.Kind() == reflect.Map {
			parent = deref(parent.Elem())
		}
		if seg == "NAME" {
			continue
		}
		var ok bool
		if f, ok = fieldByTag(parent, seg); !ok {
			return f, false
		}
		parent = f.Type
	}
	return f, true
}

var yamlBlockRE = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// The YAML examples of the documentation are configurations gmgate
// accepts: a whole file is valid but for the pools and listeners an
// example leaves out, and a fragment (a listener, a tlcp section, its
// keys) decodes in its place with no unknown key or wrong value.
func TestDocYAMLExamples(t *testing.T) {
	indent := func(s, pad string) string {
		return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad) + "\n"
	}
	places := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return "listeners:\n" + indent(s, "    ")[:2] + "-" + indent(s, "    ")[3:] },
		func(s string) string { return "listeners:\n  - tlcp:\n" + indent(s, "      ") },
	}
	files := []string{"../README.md", "../docs/config.md", "../docs/operations.md", "../docs/keys.md", "../docs/certificates.md", "../docs/bench.md", "../docs/protocol.md"}
	blocks := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlockRE.FindAllStringSubmatchIndex(string(data), -1) {
			blocks++
			line := 1 + strings.Count(string(data[:m[2]]), "\n")
			var kept []string
			elided := false
			for _, l := range strings.Split(string(data[m[2]:m[3]]), "\n") {
				if strings.TrimSpace(l) == "..." { // the rest left out
					elided = true
					continue
				}
				kept = append(kept, l)
			}
			block := strings.Join(kept, "\n")
			var decodeProbs []Problem
			placed := -1
			for i, place := range places {
				cfg, _, probs := decode(file, []byte(place(block)))
				if cfg != nil && len(probs) == 0 {
					placed = i
					break
				}
				if i == 0 {
					decodeProbs = probs
				}
			}
			if placed < 0 {
				t.Errorf("%s:%d: the example does not decode, as a file or as a fragment: %v", file, line, decodeProbs)
				continue
			}
			if placed > 0 || elided {
				continue
			}
			_, err := Parse(file, []byte(block))
			var cerr *Error
			if err != nil && !errors.As(err, &cerr) {
				t.Errorf("%s:%d: %v", file, line, err)
				continue
			}
			if cerr == nil {
				continue
			}
			for _, p := range cerr.Problems {
				leftOut := strings.Contains(p.Msg, "no upstream is called") ||
					(p.Path == "listeners" && strings.Contains(p.Msg, "no listener"))
				if !leftOut {
					t.Errorf("%s:%d: the example has a problem: %s", file, line, p)
				}
			}
		}
	}
	if blocks < 10 {
		t.Errorf("only %d YAML examples found", blocks)
	}
}

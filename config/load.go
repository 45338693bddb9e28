package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds the configuration file; a real one is a few KiB.
const maxFileSize = 4 << 20

// Problem is one thing wrong with a configuration.
type Problem struct {
	File string
	// Line is the line of the offending key or value; 0 when unknown.
	Line int
	// Path is the field path ("listeners[0].tlcp.sign_key").
	Path string
	// Msg says what is wrong; Fix, when set, what to do.
	Msg string
	Fix string
	// Transient marks a problem that may clear with no change to the
	// configuration, the certificates or the keys (an address still in
	// use, or not yet on this machine), so that starting again may
	// succeed.
	Transient bool
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteByte(':')
	}
	if p.Line > 0 {
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteByte(':')
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	if p.Fix != "" {
		b.WriteString("; ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

// Error is a configuration with problems; it lists all of them, in file
// order.
type Error struct {
	Problems []Problem
}

// Transient reports whether every problem of e is Transient: starting
// again, unchanged, may succeed. A wrong file, certificate, key, password
// or PIN fails every start until it is fixed.
func (e *Error) Transient() bool {
	for _, p := range e.Problems {
		if !p.Transient {
			return false
		}
	}
	return len(e.Problems) > 0
}

func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	if len(e.Problems) == 1 {
		lines = append(lines, "configuration has 1 problem:")
	} else {
		lines = append(lines, fmt.Sprintf("configuration has %d problems:", len(e.Problems)))
	}
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// Load reads, decodes, defaults and validates the configuration file at
// path. Relative paths in the file (certificates, keys, the access log,
// the state directory) are taken relative to the file's directory, so
// that the file means the same whatever the working directory.
func Load(path string) (*Config, error) {
	cfg, err := LoadWithProblems(path)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadWithProblems is Load that also returns the configuration when the
// file could be decoded but has problems (an *Error): defaulted, with its
// relative paths resolved, and not valid. It serves to check the parts of
// the file that the problems leave alone, never to serve.
func LoadWithProblems(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &FileError{Path: path, Err: err, msg: path + " does not exist; give the configuration file with -c FILE (`gmgate config show > gmgate.yaml` writes an example to start from)"}
	}
	if err != nil {
		return nil, &FileError{Path: path, Err: err, msg: err.Error()}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, &FileError{Path: path, msg: fmt.Sprintf("%s is a directory; give the configuration file in it with -c, such as %s", path, filepath.Join(path, "gmgate.yaml"))}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, &FileError{Path: path, Err: err, msg: fmt.Sprintf("reading %s: %v", path, err)}
	}
	if len(data) > maxFileSize {
		return nil, &FileError{Path: path, msg: fmt.Sprintf("%s: larger than %d bytes; is it the right file?", path, maxFileSize)}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return parse(path, data, dir)
}

// FileError is a configuration file that cannot be read at all: it does
// not exist, is a directory, cannot be opened or is too large. Like a
// problem in the file, starting again unchanged fails again, so serve
// exits with EX_CONFIG for it. A missing file is fs.ErrNotExist.
type FileError struct {
	Path string
	Err  error // the underlying error, if any
	msg  string
}

func (e *FileError) Error() string { return e.msg }

func (e *FileError) Unwrap() error { return e.Err }

// Parse decodes, defaults and validates a configuration; name is the file
// name used in problems. Every problem found is reported in one *Error.
// Relative paths stay as written.
func Parse(name string, data []byte) (*Config, error) {
	cfg, err := parse(name, data, "")
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// parse is Parse with relative paths resolved against dir (unless it is
// empty). When the document decodes but has problems, it returns the
// configuration as far as it goes together with the *Error.
func parse(name string, data []byte, dir string) (*Config, error) {
	cfg, idx, probs := decode(name, data)
	if cfg == nil {
		return nil, &Error{Problems: probs}
	}
	cfg.idx = idx
	Defaults(cfg)
	if dir != "" {
		cfg.resolvePaths(dir)
	}
	// A value that could not be decoded is reported once, by the decoder,
	// not again as the empty value validation then sees.
	decoded := map[string]bool{}
	for _, p := range probs {
		decoded[p.Path] = true
	}
	for _, p := range validate(cfg, idx) {
		if !underDecoded(decoded, p.Path) {
			probs = append(probs, p)
		}
	}
	if len(probs) > 0 {
		sortProblems(probs)
		return cfg, &Error{Problems: probs}
	}
	return cfg, nil
}

var (
	lineRE    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	dupRE     = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	typeRE    = regexp.MustCompile("^cannot unmarshal !!(\\w+)( `.*`)? into (\\S+)$")
)

// decode parses data strictly. It returns nil when the document cannot be
// read at all, and otherwise the decoded configuration together with the
// problems of unknown keys and wrong types.
func decode(name string, data []byte) (*Config, *nodeIndex, []Problem) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, []Problem{syntaxProblem(name, err)}
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, nil, []Problem{{File: name, Msg: "the configuration is empty", Fix: "see `gmgate config show` for a complete example"}}
	}
	idx := newNodeIndex(name, &root)
	cfg := &Config{File: name}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	var probs []Problem
	var te *yaml.TypeError
	switch {
	case err == nil:
	case errors.As(err, &te):
		duplicate := false
		for _, msg := range te.Errors {
			p, dup := idx.typeProblem(msg)
			probs = append(probs, p)
			duplicate = duplicate || dup
		}
		if duplicate {
			// yaml.v3 leaves a mapping with a duplicate key unread, and a
			// list without that item: what is left would be validated
			// under wrong indexes, and for things missing that are there.
			sortProblems(probs)
			return nil, nil, probs
		}
	default:
		return nil, nil, []Problem{syntaxProblem(name, err)}
	}
	return cfg, idx, probs
}

func underDecoded(decoded map[string]bool, path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if decoded[p] {
			return true
		}
	}
	return false
}

func syntaxProblem(name string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: name, Msg: "not valid YAML: " + msg, Fix: "check the indentation and quoting around that line"}
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = "not valid YAML: " + m[2]
	}
	return p
}

func sortProblems(p []Problem) {
	sort.SliceStable(p, func(i, j int) bool {
		if p[i].Line != p[j].Line {
			return p[i].Line < p[j].Line
		}
		return p[i].Path < p[j].Path
	})
}

// nodeIndex maps field paths to the lines of the YAML file.
type nodeIndex struct {
	file string
	// lines maps a path to the line of its key (or item).
	lines map[string]int
	// keyAt maps "line:key" to the path of that key.
	keyAt map[string]string
	// valueAt maps "line:tag" to the path whose value is a node of that
	// tag (str, int, map, seq, ...) starting on that line.
	valueAt map[string]string
}

func newNodeIndex(file string, root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{file: file, lines: map[string]int{}, keyAt: map[string]string{}, valueAt: map[string]string{}}
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		idx.walk("", root.Content[0], 0)
	}
	return idx
}

// maxDepth bounds the walk; the configuration is never deeper than a few
// levels and a hostile file must not exhaust the stack.
const maxDepth = 32

func (idx *nodeIndex) walk(path string, n *yaml.Node, depth int) {
	if depth > maxDepth {
		return
	}
	if path != "" {
		idx.valueAt[strconv.Itoa(n.Line)+":"+strings.TrimPrefix(n.ShortTag(), "!!")] = path
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if _, seen := idx.lines[p]; !seen {
				idx.lines[p] = k.Line
			}
			idx.keyAt[strconv.Itoa(k.Line)+":"+k.Value] = p
			idx.walk(p, v, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			idx.lines[p] = item.Line
			idx.walk(p, item, depth+1)
		}
	}
}

// has reports whether the file has the field at path.
func (idx *nodeIndex) has(path string) bool {
	if idx == nil {
		return false
	}
	_, ok := idx.lines[path]
	return ok
}

// line returns the line of path, or of its nearest ancestor present in
// the file.
func (idx *nodeIndex) line(path string) int {
	if idx == nil {
		return 0
	}
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := idx.lines[p]; ok {
			return l
		}
	}
	return 0
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// pathAtLine returns the path of the key on line l (the deepest one).
func (idx *nodeIndex) pathAtLine(l int) string {
	best := ""
	for p, pl := range idx.lines {
		if pl == l && (len(p) > len(best) || (len(p) == len(best) && p < best)) {
			best = p
		}
	}
	return best
}

// typeProblem turns one yaml.v3 decoding message into a Problem, and
// reports whether it is a duplicate key.
func (idx *nodeIndex) typeProblem(msg string) (Problem, bool) {
	p := Problem{File: idx.file, Msg: msg}
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return p, false
	}
	p.Line, _ = strconv.Atoi(m[1])
	rest := m[2]
	if d := dupRE.FindStringSubmatch(rest); d != nil {
		key, err := strconv.Unquote(d[1])
		if err != nil {
			key = d[1]
		}
		p.Path = idx.keyAt[m[1]+":"+key]
		if p.Path == "" {
			p.Path = idx.pathAtLine(p.Line)
		}
		first, _ := strconv.Atoi(d[2])
		p.Msg = fmt.Sprintf("given twice (first at line %d)", first)
		p.Fix = "keep one of them; the rest of the file is checked once every key is given once"
		return p, true
	}
	if u := unknownRE.FindStringSubmatch(rest); u != nil {
		key := u[1]
		p.Path = idx.keyAt[m[1]+":"+key]
		if p.Path == "" {
			p.Path = key
		}
		p.Msg = fmt.Sprintf("unknown field %q", key)
		if known := knownFields(parentPath(p.Path)); len(known) > 0 {
			p.Fix = "known fields here: " + strings.Join(known, ", ")
		} else {
			p.Fix = "remove it or check its indentation"
		}
		return p, false
	}
	p.Path = idx.pathAtLine(p.Line)
	if t := typeRE.FindStringSubmatch(rest); t != nil {
		if vp, ok := idx.valueAt[m[1]+":"+t[1]]; ok {
			// A block value starts on the line after its key: name the
			// key's line.
			p.Path, p.Line = vp, idx.line(vp)
		}
		p.Msg = fmt.Sprintf("expected %s, found a %s%s", kindName(t[3]), yamlKindName(t[1]), t[2])
		p.Fix = "write a value of the expected kind"
		if t[3] == durationType {
			p.Fix = durationFix
		}
		return p, false
	}
	p.Msg, p.Fix, _ = strings.Cut(rest, "; ")
	return p, false
}

func kindName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "config."), strings.HasPrefix(goType, "*config."):
		return "a mapping (key: value lines)"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case goType == durationType:
		return "a duration"
	}
	return goType
}

func yamlKindName(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "int":
		return "number"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	}
	return tag
}

package main

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/accel"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandLine is a gmgate command line written in the documentation or
// in a command's help.
type commandLine struct {
	where string
	text  string
	// named is a command named in a sentence (a code span), perhaps with
	// a flag, rather than a whole command line: its arguments may be
	// left out.
	named bool
}

// gmgateRE finds where a command line starts: at the start of a line, a
// shell prompt, or after a pipe, &&, ; or a command prefix (taskset).
var gmgateRE = regexp.MustCompile(`(?:^|^\$ |\| |&& |; |taskset -c \S+ )(gmgate (?:[a-z][a-z-]*)(?: .*)?)$`)

// helpCommandLines returns the command lines of every command's Long text
// and examples.
func helpCommandLines(c *cobra.Command) []commandLine {
	var out []commandLine
	// The Long text's indented lines are code; the others are prose.
	var long []string
	for _, l := range strings.Split(c.Long, "\n") {
		if strings.HasPrefix(l, "  ") {
			long = append(long, l)
		}
	}
	for _, text := range []string{strings.Join(long, "\n"), c.Example} {
		out = append(out, codeCommandLines(c.CommandPath()+" --help", text)...)
	}
	for _, sub := range c.Commands() {
		out = append(out, helpCommandLines(sub)...)
	}
	return out
}

// codeCommandLines returns the command lines of a text of code: one per
// line, continued lines joined.
func codeCommandLines(where, text string) []commandLine {
	var out []commandLine
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSpace(strings.TrimSuffix(line, `\`)) + " " + strings.TrimSpace(lines[i])
		}
		m := gmgateRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		// A listing of commands: the command, two spaces or more, what it
		// does.
		cmdline, _, _ := strings.Cut(m[1], "  ")
		if words := strings.Fields(cmdline); len(words) > 1 && strings.HasSuffix(words[1], ":") ||
			len(words) > 2 && strings.HasSuffix(words[2], ":") {
			continue // a report's title line
		}
		out = append(out, commandLine{where: where, text: cmdline})
	}
	return out
}

var inlineCommandRE = regexp.MustCompile("`(gmgate [a-z][^`]*)`")

// docCommandLines returns the command lines of a Markdown file: in its
// code blocks (fenced or indented) and in code spans.
func docCommandLines(t *testing.T, file string) []commandLine {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []commandLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, fenced := 0, false
	var block []string
	blockStart := 0
	flush := func() {
		if len(block) > 0 {
			for _, cl := range codeCommandLines("", strings.Join(block, "\n")) {
				cl.where = file + ":" + itoa(blockStart)
				out = append(out, cl)
			}
		}
		block = nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			if fenced {
				flush()
			} else {
				blockStart = n + 1
			}
			fenced = !fenced
		case fenced || strings.HasPrefix(line, "    "):
			if len(block) == 0 {
				blockStart = n
			}
			block = append(block, line)
		default:
			flush()
			for _, m := range inlineCommandRE.FindAllStringSubmatch(line, -1) {
				out = append(out, commandLine{where: file + ":" + itoa(n), text: m[1], named: true})
			}
		}
	}
	flush()
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// shellWords splits a command line as the shell would, up to the end of
// the command (a comment, a pipe, a redirection, && or ;).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
			continue
		case ch == '\'' || ch == '"':
			quote, inWord = ch, true
			continue
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			continue
		case !inWord && (ch == '#' || ch == '|' || ch == '>' || ch == ';' || ch == '&' || ch == '<'):
			return words
		case ch == '$' && i+1 < len(s) && s[i+1] == '(' && quote == 0:
			// $(...): a value computed by the shell.
			depth := 0
			for ; i < len(s); i++ {
				if s[i] == '(' {
					depth++
				} else if s[i] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			cur.WriteString("$SUBST")
			inWord = true
			continue
		}
		cur.WriteByte(ch)
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// placeholderRE matches a value the reader fills in: FILE, PID, $MAINPID,
// "…", "...".
var placeholderRE = regexp.MustCompile(`^(?:[A-Z][A-Z0-9_.]*|\$[A-Z_]+|.*\$SUBST.*|.*\$\(.*|.*….*|\.\.\.)$`)

// placeholderValue is a value of the flag's type that stands for a
// placeholder.
func placeholderValue(typ string) string {
	switch typ {
	case "int", "int64", "uint", "float64", "float32", "ints", "intSlice":
		return "1"
	case "duration":
		return "1s"
	}
	return "x"
}

// checkCommandLine parses a documented command line as gmgate would: the
// command must exist, each flag must be one it has with a value it
// takes (in its range, for a bench command's numeric flag; a key
// reference one that opening it would accept), and the
// arguments must be what it accepts.
func checkCommandLine(words []string, named bool) string {
	resetFlags(rootCmd)
	defer resetFlags(rootCmd)
	cmd, rest, err := rootCmd.Find(words)
	if err != nil {
		return err.Error()
	}
	var args []string
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		if w == "[" || w == "]" {
			continue
		}
		w = strings.Trim(w, "[]")
		args = append(args, w)
		if !strings.HasPrefix(w, "-") || strings.Contains(w, "=") || w == "-" {
			continue
		}
		name := strings.TrimLeft(w, "-")
		f := cmd.Flags().Lookup(name)
		if len(w)-len(name) == 1 {
			f = cmd.Flags().ShorthandLookup(name)
		}
		if f == nil || f.NoOptDefVal != "" {
			continue // an unknown flag is the parser's to report
		}
		if i+1 == len(rest) {
			// `gmgate serve -c` in a sentence: the value follows in words.
			args = append(args, placeholderValue(f.Value.Type()))
			continue
		}
		i++
		v := strings.Trim(rest[i], "[]")
		if placeholderRE.MatchString(v) {
			v = placeholderValue(f.Value.Type())
		}
		if strings.HasSuffix(f.Name, "key") && (strings.HasPrefix(v, "sdf:") || strings.HasPrefix(v, "file:")) {
			if err := accel.Check(v); err != nil {
				return "--" + f.Name + ": " + err.Error()
			}
		}
		args = append(args, v)
	}
	if err := cmd.ParseFlags(args); err != nil && !errors.Is(err, pflag.ErrHelp) {
		return err.Error()
	}
	if cmd.Parent() == benchCmd {
		if err := checkBenchFlags(cmd, nil); err != nil {
			return err.Error()
		}
	}
	if !cmd.Runnable() && len(cmd.Flags().Args()) > 0 {
		return "unknown command " + strings.Join(cmd.Flags().Args(), " ") + " for " + cmd.CommandPath()
	}
	if named {
		return ""
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err.Error()
	}
	return ""
}

// Every gmgate command line in the documentation and in the commands'
// help is one gmgate accepts: its commands, flags, values and arguments.
func TestDocumentedCommandLinesParse(t *testing.T) {
	lines := helpCommandLines(rootCmd)
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	for _, file := range files {
		lines = append(lines, docCommandLines(t, file)...)
	}
	if len(lines) < 100 {
		t.Fatalf("only %d command lines found", len(lines))
	}
	for _, cl := range lines {
		words := shellWords(cl.text)
		if problem := checkCommandLine(words[1:], cl.named); problem != "" {
			t.Errorf("%s: %s: %s", cl.where, cl.text, problem)
		}
	}
}

// A chart file that could not be written is refused before anything is
// measured, naming the flag.
func TestBenchChartRefusedBeforeMeasuring(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"bench", "crypto", "-q", "--only", "sha-256", "--duration", "2ms", "--sizes", "16", "--chart", filepath.Join(dir, "c.png")},
		{"bench", "handshake", "-q", "--target", "127.0.0.1:1", "-d", "1ms", "--warmup", "0s", "--chart", filepath.Join(dir, "gone", "c.svg")},
	} {
		out, err := runCLI(t, args...)
		if err == nil || !strings.HasPrefix(err.Error(), "--chart ") {
			t.Errorf("%v: got %v, want an error about --chart\n%s", args[1:], err, out)
		}
		if strings.Contains(out, "ops/s") || strings.Contains(out, "handshakes/s") {
			t.Errorf("%v: measured before refusing the chart:\n%s", args[1:], out)
		}
	}
}

// Every command a user can run shows in --help a working example of
// itself.
func TestDocumentedExampleInEveryCommandHelp(t *testing.T) {
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Runnable() {
			found := false
			for _, cl := range helpCommandLines(c) {
				if words := shellWords(cl.text); strings.Join(words, " ") == c.CommandPath() || strings.HasPrefix(strings.Join(words, " "), c.CommandPath()+" ") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s --help shows no example of it", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(rootCmd)
}

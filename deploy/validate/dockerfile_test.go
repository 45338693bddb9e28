package validate

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
)

const repoRoot = "../.."

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, EXPOSE...
	args string
}

// finalStage reads the Dockerfile and returns the instructions of its
// last stage, the image that ships.
func finalStage(t *testing.T) []instruction {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var all []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		all = append(all, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	last := -1
	for i, in := range all {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return all[last:]
}

// The image runs as written: the example configuration it ships loads,
// listens only on ports the image exposes and uid 10001 may bind, logs
// where the image can write, and the HEALTHCHECK asks the example's
// admin listener with gmgate itself (the image has no curl). A static
// check: no Docker daemon is needed.
func TestDockerfile(t *testing.T) {
	stage := finalStage(t)
	var (
		example, binary string
		exposed         []string
		health          []string
		healthTimeout   time.Duration
		volumes         []string
		user            string
	)
	for _, in := range stage {
		fields := strings.Fields(in.args)
		switch in.cmd {
		case "COPY":
			var srcDst []string
			for _, f := range fields {
				if !strings.HasPrefix(f, "--") {
					srcDst = append(srcDst, f)
				}
			}
			if len(srcDst) != 2 {
				continue
			}
			switch srcDst[1] {
			case "/etc/gmgate/gmgate.yaml.example":
				example = srcDst[0]
			case "/usr/local/bin/gmgate":
				binary = srcDst[1]
			}
		case "EXPOSE":
			exposed = append(exposed, fields...)
		case "USER":
			user = in.args
		case "VOLUME":
			if err := json.Unmarshal([]byte(in.args), &volumes); err != nil {
				t.Errorf("VOLUME %s: %v", in.args, err)
			}
		case "HEALTHCHECK":
			opts, cmd, ok := strings.Cut(in.args, "CMD ")
			if !ok {
				t.Fatalf("HEALTHCHECK without CMD: %s", in.args)
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(cmd)), &health); err != nil {
				t.Fatalf("HEALTHCHECK CMD is not in exec form (the image has no shell tools to rely on): %s", cmd)
			}
			for _, o := range strings.Fields(opts) {
				if v, ok := strings.CutPrefix(o, "--timeout="); ok {
					d, err := time.ParseDuration(v)
					if err != nil {
						t.Errorf("HEALTHCHECK %s: %v", o, err)
					}
					healthTimeout = d
				}
			}
		}
	}
	if binary == "" {
		t.Fatal("the image does not copy gmgate to /usr/local/bin/gmgate")
	}
	if !strings.HasPrefix(user, "gmgate") && !strings.HasPrefix(user, "10001") {
		t.Errorf("USER %q: the image should run as gmgate (uid 10001)", user)
	}
	if example == "" {
		t.Fatal("the image ships no /etc/gmgate/gmgate.yaml.example")
	}
	if ignored(t, example) {
		t.Errorf("%s is left out of the build context by .dockerignore", example)
	}
	cfg, err := config.Load(filepath.Join(repoRoot, example))
	if err != nil {
		t.Fatalf("%s: %v", example, err)
	}

	// Ports: exposed, and above 1024 (uid 10001 has no
	// CAP_NET_BIND_SERVICE).
	port := func(what, addr string) string {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s %q: %v", what, addr, err)
			return ""
		}
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("%s listens on %s, which the image does not EXPOSE (%v)", what, addr, exposed)
		}
		if len(p) < 4 {
			t.Errorf("%s listens on %s: uid 10001 cannot bind a port below 1024", what, addr)
		}
		return p
	}
	for _, l := range cfg.Listeners {
		port("listeners."+l.Name, l.Listen)
	}
	if cfg.Admin.Listen == "off" {
		t.Fatalf("%s turns the admin listener off, which the HEALTHCHECK asks", example)
	}
	adminHost, _, _ := net.SplitHostPort(cfg.Admin.Listen)
	adminPort := port("admin", cfg.Admin.Listen)

	// The access log: a stream, since the image makes no log directory.
	switch cfg.Log.Access {
	case "stdout", "stderr", "off":
	default:
		t.Errorf("%s logs to %s, a file in a directory the image does not make (log to stdout)", example, cfg.Log.Access)
	}
	// Every file the example names is under a volume.
	for _, f := range configFiles(cfg) {
		if !slices.ContainsFunc(volumes, func(v string) bool { return strings.HasPrefix(f, v+"/") }) {
			t.Errorf("%s names %s, which is under none of the image's volumes %v", example, f, volumes)
		}
	}

	// The HEALTHCHECK: gmgate health, against the example's admin
	// listener (its default address, 127.0.0.1:9180, unless --admin),
	// giving up before Docker does.
	if len(health) < 2 || health[0] != binary || health[1] != "health" {
		t.Fatalf("HEALTHCHECK runs %q, want %s health", health, binary)
	}
	asks := "127.0.0.1:9180"
	var ownTimeout time.Duration = 5 * time.Second
	for i := 2; i+1 < len(health); i++ {
		switch health[i] {
		case "--admin":
			asks = health[i+1]
		case "--timeout":
			if ownTimeout, err = time.ParseDuration(health[i+1]); err != nil {
				t.Errorf("gmgate health --timeout %s: %v", health[i+1], err)
			}
		}
	}
	askHost, askPort, _ := net.SplitHostPort(asks)
	if askPort != adminPort || !(adminHost == askHost || adminHost == "" || adminHost == "0.0.0.0" || adminHost == "::") {
		t.Errorf("the HEALTHCHECK asks %s, which the example's admin.listen %s does not answer", asks, cfg.Admin.Listen)
	}
	if healthTimeout == 0 || ownTimeout >= healthTimeout {
		t.Errorf("gmgate health waits %s, Docker %s: health should give up first and say why", ownTimeout, healthTimeout)
	}
}

// ignored reports whether .dockerignore leaves file (relative to the
// repository) out of the build context: a pattern that matches it or one
// of its parent directories.
func ignored(t *testing.T, file string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return false
	}
	out := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		pattern := strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/")
		for p := file; p != "." && p != "/"; p = path.Dir(p) {
			ok, _ := path.Match(pattern, p)
			if !ok && strings.HasPrefix(pattern, "**/") {
				ok, _ = path.Match(strings.TrimPrefix(pattern, "**/"), path.Base(p))
			}
			if ok {
				out = !neg
				break
			}
		}
	}
	return out
}

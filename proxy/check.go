package proxy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/route"
	"github.com/gmgate/gmgate/internal/tcplisten"
	"github.com/gmgate/gmgate/internal/upstream"
)

// CheckOptions adjust Check.
type CheckOptions struct {
	// Offline checks what the files say, not what this machine has: no
	// private key, crypto card, password or PIN is opened, and no address
	// is bound. For pipelines that have the configuration and the
	// certificates but not the secrets.
	Offline bool
	// RunningPID is the process ID of the gmgate that serves now, when
	// checking a configuration before a reload: the ports that process
	// listens on count as free, since a reload keeps them.
	RunningPID int
	// Logger receives what loading logs; discarded when nil.
	Logger *slog.Logger
}

// CheckResult is what Check found besides problems.
type CheckResult struct {
	// Warnings are things that serve but that the operator should know
	// about, each with its field and fix.
	Warnings []config.Problem
	// Skipped says what an offline check did not look at.
	Skipped []string
}

// Check runs on cfg what New runs before it serves: the certificates and
// keys are loaded and checked (passwords and PINs from their variables
// and files, key against certificate, the pair's shape, expiry, crypto
// cards opened and self-tested), the suites against the keys, the ACME
// settings and state directory, the access log, and whether each address
// can be bound. It returns a *config.Error with every problem, or nil
// when New would start. Nothing is left open.
func Check(cfg *config.Config, opts CheckOptions) (*CheckResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := newServer(cfg, Options{Logger: opts.logger()})
	res := &CheckResult{}
	var probs []config.Problem
	gen, err := s.build(cfg, nil, buildOptions{check: true, offline: opts.Offline})
	if err != nil {
		probs = append(probs, problemsOf(err)...)
	} else {
		res.Warnings = gen.warnings
		gen.close()
	}
	if opts.Offline {
		res.Warnings = append(res.Warnings, absentKeyFiles(cfg)...)
		res.Skipped = append(res.Skipped, "private keys, crypto cards, passwords and PINs", "binding addresses", "the access log file")
	} else {
		if _, closer, err := openAccessLog(cfg.Log.Access, nil); err != nil {
			probs = append(probs, accessLogProblem(cfg, err))
		} else if closer != nil {
			closer.Close()
		}
		probs = append(probs, checkAddresses(cfg, opts.RunningPID)...)
	}
	if len(probs) > 0 {
		return res, configError(probs)
	}
	return res, nil
}

// absentKeyFiles are the key files of cfg that are not on this machine,
// which an offline check, opening no key, would not say otherwise: the
// pipelines it is for often lack the keys on purpose, so each is a
// warning, not a problem.
func absentKeyFiles(cfg *config.Config) []config.Problem {
	var out []config.Problem
	absent := func(path, ref string) {
		if strings.TrimSpace(ref) == "" {
			return
		}
		r, err := accel.ParseRef(ref)
		if err != nil || r.Scheme != "file" {
			return
		}
		if _, err := os.Stat(r.Path); !errors.Is(err, fs.ErrNotExist) {
			return
		}
		out = append(out, cfg.Problem(path, "key file "+r.Path+" is not on this machine",
			"--offline does not open keys, but serve needs it where it runs"))
	}
	sources, paths := certSources(cfg)
	for _, src := range sources {
		at := func(side, field, ref string) {
			path := cfg.SourcePath(src.Name, side, upstream.Source)
			if p, ok := paths[src.Name]; ok {
				path = p + "." + side
			}
			absent(path+"."+field, ref)
		}
		if t := src.TLCP; t != nil {
			at("tlcp", "sign_key", t.SignKey)
			at("tlcp", "enc_key", t.EncKey)
		}
		if t := src.TLS; t != nil {
			at("tls", "key", t.Key)
		}
		if t := src.SM2; t != nil {
			at("tls.sm2", "key", t.Key)
		}
	}
	// The client keys of https:// upstreams and of the session store.
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		if u := cfg.Upstreams[name]; u != nil && u.TLS != nil {
			absent(config.Field(u.Path(), "tls.key"), u.TLS.Key)
		}
	}
	if ss := cfg.SessionStore; ss != nil && ss.Redis != nil && ss.Redis.TLS != nil {
		absent("session_store.redis.tls.key", ss.Redis.TLS.Key)
	}
	return out
}

func (o CheckOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// CheckFile loads the configuration file at path and checks it as Check
// does. When the file has problems of its own, the certificates, keys,
// ACME files and addresses that those problems leave alone are checked
// too, so that
// every problem is listed at once; cfg is nil then.
func CheckFile(path string, opts CheckOptions) (cfg *config.Config, res *CheckResult, err error) {
	cfg, err = loadFile(path, opts)
	if err != nil {
		return nil, nil, err
	}
	res, err = Check(cfg, opts)
	return cfg, res, err
}

// loadFile loads the configuration file at path. When the file decodes
// but has problems, the returned *config.Error also lists the problems of
// the certificates, keys, ACME files and addresses that the file's
// problems do not touch (none of a field that has a problem, or is under or above one).
func loadFile(path string, opts CheckOptions) (*config.Config, error) {
	cfg, err := config.LoadWithProblems(path)
	if err == nil || cfg == nil {
		return cfg, err
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		return nil, err
	}
	probs := slices.Clone(ce.Problems)
	store, _, more := openStore(cfg, opts.logger(), opts.Offline, nil)
	if store != nil {
		store.Close()
	}
	// The ACME files (ca_root, the state directory) are read as a check
	// reads them, which makes no manager.
	s := newServer(cfg, Options{Logger: opts.logger()})
	more = append(more, s.acmeSites(cfg, nil, &generation{acme: map[string]*acmeSite{}}, true)...)
	if !opts.Offline {
		more = append(more, checkAddresses(cfg, opts.RunningPID)...)
	}
	for _, m := range more {
		if !slices.ContainsFunc(ce.Problems, func(p config.Problem) bool { return config.RelatedPaths(p.Path, m.Path) }) {
			probs = append(probs, m)
		}
	}
	return nil, configError(probs)
}

// checkAddresses binds each address of cfg as New does and releases it at
// once. A port that the process runningPID listens on is not a problem.
func checkAddresses(cfg *config.Config, runningPID int) []config.Problem {
	var probs []config.Problem
	try := func(path, addr string, ln net.Listener, err error) {
		if err == nil {
			ln.Close()
			return
		}
		if runningPID > 0 && errors.Is(err, syscall.EADDRINUSE) && tcplisten.ListensOn(runningPID, addr) {
			return
		}
		probs = append(probs, bindProblem(cfg, path, addr, err))
	}
	for _, lc := range cfg.Listeners {
		ln, err := listen(cfg, lc)
		try(config.Field(lc.Path(), "listen"), lc.Listen, ln, err)
	}
	if cfg.Admin.Listen != "off" {
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		try("admin.listen", cfg.Admin.Listen, ln, err)
	}
	return probs
}

// listen binds a listener's address the way every listener is bound.
func listen(cfg *config.Config, lc config.Listener) (net.Listener, error) {
	tl := tcplisten.Config{KeepAlive: tcplisten.KeepAlive, DeferAccept: deferAccept(cfg, lc)}
	return tl.Listen(context.Background(), lc.Listen)
}

// deferAccept is how long the kernel holds a connection to lc until its
// first bytes are in. The client of a tlcp, tls, auto or http listener
// speaks first (TLCP, TLS, HTTP or a PROXY header): the kernel hands a
// connection over once its first bytes are in, or after the handshake
// timeout. On a tcp listener the server may speak first (SMTP, MySQL),
// so connections are handed over at once.
func deferAccept(cfg *config.Config, lc config.Listener) time.Duration {
	if lc.Protocol == config.ProtocolTCP {
		return 0
	}
	return cfg.Timeouts.Handshake.D()
}

// problemsOf returns the problems of a *config.Error, or err as one
// problem.
func problemsOf(err error) []config.Problem {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []config.Problem{{Msg: err.Error()}}
}

func configError(probs []config.Problem) error {
	sort.SliceStable(probs, func(i, j int) bool {
		if probs[i].Line != probs[j].Line {
			return probs[i].Line < probs[j].Line
		}
		return probs[i].Path < probs[j].Path
	})
	return &config.Error{Problems: probs}
}

// certProblems turns the errors of certs.NewStore into problems at the
// fields of the listeners and sites they belong to; paths maps each
// certificate source to its field path.
func certProblems(cfg *config.Config, paths map[string]string, err error) []config.Problem {
	var probs []config.Problem
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *certs.FieldError
		if !errors.As(e, &fe) {
			probs = append(probs, config.Problem{File: cfg.File, Msg: e.Error()})
			continue
		}
		path := cfg.SourcePath(fe.Source, fe.Side, upstream.Source)
		if p, ok := paths[fe.Source]; ok {
			path = p + "." + fe.Side
		}
		if fe.Field != "" {
			path += "." + fe.Field
		}
		probs = append(probs, cfg.Problem(path, fe.Err.Error(), ""))
	}
	return probs
}

// poolProblem places an error of making upstream name's pool at its field.
func poolProblem(cfg *config.Config, name string, err error) config.Problem {
	return cfg.ProblemAt(cfg.Upstreams[name].Path(), err, "upstream "+name+": ")
}

// accessLogProblem explains why the access log file could not be opened,
// with the fix for that cause.
func accessLogProblem(cfg *config.Config, err error) config.Problem {
	path := cfg.Log.Access
	dir := filepath.Dir(path)
	fix := "create the directory " + dir + " writable by the user gmgate runs as, or log to stdout"
	switch {
	case errors.Is(err, syscall.EISDIR):
		fix = "name a file in it, such as " + filepath.Join(path, "access.log")
	case errors.Is(err, syscall.ENOTDIR):
		fix = "a part of the path is a file, not a directory: choose a path in a directory"
		for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && !st.IsDir() {
				fix = d + " is a file, not a directory: choose a path in a directory"
				break
			}
		}
	case errors.Is(err, syscall.EROFS):
		fix = "choose a path on a writable file system, or log to stdout"
	case errors.Is(err, fs.ErrPermission):
		if _, serr := os.Lstat(path); serr == nil {
			fix = "make " + path + " writable by the user gmgate runs as, or log to stdout"
		} else {
			fix = "make the directory " + dir + " writable by the user gmgate runs as, or log to stdout"
		}
	}
	return cfg.Problem("log.access", strings.TrimPrefix(err.Error(), "log.access: "), fix)
}

// bindProblem explains why an address could not be bound.
func bindProblem(cfg *config.Config, path, addr string, err error) config.Problem {
	_, port, _ := net.SplitHostPort(addr)
	fix := ""
	// Another process may let go of the address, or the machine get it:
	// only a missing permission stays until the configuration or the
	// service changes.
	transient := true
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		fix = fmt.Sprintf("stop what listens there (`ss -ltnp 'sport = :%s'` shows it) or choose another port", port)
		err = fmt.Errorf("%s is already in use", addr)
	case errors.Is(err, syscall.EACCES):
		fix = "ports below 1024 need root or CAP_NET_BIND_SERVICE (deploy/gmgate.service grants it)"
		err = fmt.Errorf("no permission to bind %s", addr)
		transient = false
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		fix = fmt.Sprintf("use an address of this machine, or \":%s\" for all of them", port)
		err = fmt.Errorf("%s is not an address of this machine", addr)
	default:
		err = fmt.Errorf("cannot bind %s: %w", addr, err)
	}
	p := cfg.Problem(path, err.Error(), fix)
	p.Transient = transient
	return p
}

// warnings are what Check reports about a configuration that serves;
// paths maps each certificate source to its field path.
func (s *Server) warnings(cfg *config.Config, gen *generation, paths map[string]string) []config.Problem {
	var out []config.Problem
	// The handshake timeout runs from accept too, so a longer wait for
	// the ClientHello never happens. A default client_hello above a
	// lowered handshake is taken down to it without a word.
	if t := cfg.Timeouts; t.ClientHello > t.Handshake && cfg.InFile("timeouts.client_hello") {
		out = append(out, cfg.Problem("timeouts.client_hello",
			fmt.Sprintf("%s is longer than timeouts.handshake (%s), which closes a connection whose ClientHello has not arrived by then", t.ClientHello, t.Handshake),
			fmt.Sprintf("set client_hello to at most %s, or raise handshake", t.Handshake)))
	}
	for _, lc := range cfg.Listeners {
		p := lc.Path()
		if st := gen.states[lc.Name]; st != nil {
			out = append(out, route.ECDHEWithoutCAWarning(cfg, &lc, st.sites.Sites)...)
			var certs route.Certificates
			if gen.store != nil {
				certs = gen.store
			}
			out = append(out, route.CertificateHostWarnings(cfg, &lc, st.sites.Sites, certs)...)
		}
		out = append(out, route.SiteHostWarnings(cfg, &lc, p)...)
		out = append(out, route.OverlapWarnings(cfg, &lc)...)
		if lc.Protocol == config.ProtocolHTTP && len(lc.Routes) > 0 && !loopbackListen(lc.Listen) {
			out = append(out, cfg.Problem(p+".listen",
				fmt.Sprintf("the http listener forwards requests in plain text on %s, which is not a loopback address", lc.Listen),
				"bind it to 127.0.0.1 for local applications, or use redirect_https on a public port-80 listener"))
		}
		if lc.Protocol == config.ProtocolTCP && !loopbackListen(lc.Listen) {
			out = append(out, cfg.Problem(p+".listen",
				fmt.Sprintf("the tcp listener takes plain-text connections on %s, which is not a loopback address", lc.Listen),
				"bind it to 127.0.0.1 for local applications, or keep the port behind a firewall"))
		}
	}
	out = append(out, config.GMCapableWarnings(cfg)...)
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		if t := cfg.Upstreams[name].TLCP; t != nil && t.InsecureSkipVerify {
			out = append(out, cfg.Problem("upstreams."+name+".tlcp.insecure_skip_verify",
				"the targets' certificates are not verified: anyone on the way can read and change the traffic",
				"set ca (and server_name when the targets are reached by address) and remove insecure_skip_verify"))
		}
		if t := cfg.Upstreams[name].TLS13SM; t != nil && t.InsecureSkipVerify {
			out = append(out, cfg.Problem("upstreams."+name+".tls13sm.insecure_skip_verify",
				"the targets' certificates are not verified: anyone on the way can read and change the traffic",
				"set ca (and server_name when the targets are reached by address) and remove insecure_skip_verify"))
		}
	}
	if gen.store != nil {
		for _, w := range gen.store.Warnings() {
			path := cfg.SourcePath(w.Source, w.Side, upstream.Source)
			if p, ok := paths[w.Source]; ok {
				path = p + "." + w.Side
			}
			out = append(out, cfg.Problem(path, w.Msg, ""))
		}
	}
	return out
}

func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Package demo is `gmgate serve --demo` and `gmgate serve --upstream URL`:
// a state directory with a local SM2 CA, a dual certificate and a TLS
// certificate for the loopback address (made by package certs, reused on
// the next start), and a gateway configuration that puts an auto listener
// in front of a small built-in backend (--demo) or of the user's own
// service (--upstream), whose configuration it writes to the state
// directory for `gmgate serve -c`.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/proxy"
)

// Names in the state directory.
const (
	leafName = "localhost"
	tlsDir   = "tls"
)

// renewBefore is how long before expiry the demo issues new certificates.
const renewBefore = 7 * 24 * time.Hour

// State is the demo's state directory: the SM2 CA and dual certificate,
// and the ECDSA CA and certificate of the TLS side.
type State struct {
	Dir     string
	Dual    pki.DualFiles
	TLSCA   string
	TLSCert string
	TLSKey  string
	// Created is true when the certificates were made on this start.
	Created bool
}

// DefaultStateDir is under the user's configuration directory.
func DefaultStateDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user configuration directory (%v); pass --state DIR", err)
	}
	return filepath.Join(base, "gmgate", "demo"), nil
}

// Prepare makes the state directory's certificates, or reuses those
// already there while they are valid.
func Prepare(dir string) (*State, error) {
	if err := os.MkdirAll(filepath.Join(dir, tlsDir), 0o700); err != nil {
		return nil, err
	}
	st := &State{
		Dir:     dir,
		Dual:    pki.DualFileNames(dir, leafName),
		TLSCA:   filepath.Join(dir, tlsDir, pki.CACertFile),
		TLSCert: filepath.Join(dir, tlsDir, leafName+".crt"),
		TLSKey:  filepath.Join(dir, tlsDir, leafName+".key"),
	}
	if !usableTLCP(st.Dual) {
		if err := issueTLCP(dir); err != nil {
			return nil, fmt.Errorf("demo certificates in %s: %w", dir, err)
		}
		st.Created = true
	}
	if !usableTLS(st.TLSCert, st.TLSKey) {
		if err := issueTLS(filepath.Join(dir, tlsDir)); err != nil {
			return nil, fmt.Errorf("demo TLS certificate in %s: %w", dir, err)
		}
		st.Created = true
	}
	return st, nil
}

func usableTLCP(f pki.DualFiles) bool {
	c, err := certs.LoadTLCP(f.SignCert, f.SignKey, f.EncCert, f.EncKey)
	return err == nil && time.Until(c.SignLeaf.NotAfter) > renewBefore && time.Until(c.EncLeaf.NotAfter) > renewBefore
}

func usableTLS(cert, key string) bool {
	c, err := certs.LoadTLS(cert, key)
	return err == nil && c.Leaf != nil && time.Until(c.Leaf.NotAfter) > renewBefore
}

var demoNames = pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}

// loadOrNewCA reuses the CA in dir, or makes one of the given kind.
func loadOrNewCA(dir string, alg pki.KeyAlgorithm) (*pki.CA, error) {
	if ca, err := pki.LoadCA(dir); err == nil && ca.KeyAlgorithm() == alg && time.Until(ca.Root.NotAfter) > renewBefore {
		return ca, nil
	}
	ca, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: alg})
	if err != nil {
		return nil, err
	}
	return ca, ca.Write(dir, nil)
}

func issueTLCP(dir string) error {
	ca, err := loadOrNewCA(dir, pki.KeySM2)
	if err != nil {
		return err
	}
	pair, err := ca.IssueDual(demoNames)
	if err != nil {
		return err
	}
	_, err = pair.Write(dir, leafName, nil)
	return err
}

func issueTLS(dir string) error {
	ca, err := loadOrNewCA(dir, pki.KeyECDSAP256)
	if err != nil {
		return err
	}
	leaf, err := ca.IssueTLS(demoNames)
	if err != nil {
		return err
	}
	_, _, err = leaf.Write(dir, leafName, nil)
	return err
}

// Config is the demo gateway: an auto listener on listen in front of the
// backend at backendURL, with the admin listener on admin.
func (st *State) Config(listen, admin, backendURL string) *config.Config {
	cfg := st.config("demo", listen, admin, "backend", backendURL)
	cfg.Upstreams["backend"].Health = config.Health{Path: "/healthz"}
	config.Defaults(cfg)
	cfg.Timeouts.Shutdown = config.Duration(5 * time.Second)
	return cfg
}

// UpstreamConfig is the quick start in front of the user's service: an
// auto listener on listen in front of upstreamURL (checked by connecting
// to it), with the admin listener on admin. Defaults are not applied, so
// that config.Show writes only what differs from them.
func (st *State) UpstreamConfig(listen, admin, upstreamURL string) *config.Config {
	return st.config("edge", listen, admin, "app", upstreamURL)
}

func (st *State) config(listener, listen, admin, upstream, upstreamURL string) *config.Config {
	return &config.Config{
		Admin: config.Admin{Listen: admin},
		Log:   config.Log{Level: "info", Access: "stdout"},
		Listeners: []config.Listener{{
			Name:     listener,
			Listen:   listen,
			Protocol: config.ProtocolAuto,
			TLCP: &config.TLCP{
				SignCert: st.Dual.SignCert, SignKey: st.Dual.SignKey,
				EncCert: st.Dual.EncCert, EncKey: st.Dual.EncKey,
				// ECDHE clients send certificates even without client
				// authentication; naming the local CA lets clients that
				// need their issuer named (GmSSL) send theirs.
				ClientCA: filepath.Join(st.Dir, pki.CACertFile),
			},
			TLS: &config.TLS{Cert: st.TLSCert, Key: st.TLSKey},
			SessionHeaders: config.SessionHeaders{
				Protocol: "X-TLCP-Protocol", Suite: "X-TLCP-Suite", Resumed: "X-TLCP-Resumed",
				ClientSubject: "X-TLCP-Client-Subject",
			},
			Routes: []config.Route{{Upstream: upstream}},
		}},
		Upstreams: map[string]*config.Upstream{
			upstream: {Targets: []string{upstreamURL}},
		},
	}
}

// Backend is the built-in service behind the demo gateway: it shows how
// the client reached it.
func Backend() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Hello from the gmgate demo backend.\n\n")
		fmt.Fprintf(w, "You reached it through gmgate with %s", orUnknown(r.Header.Get("X-TLCP-Protocol")))
		if s := r.Header.Get("X-TLCP-Suite"); s != "" {
			fmt.Fprintf(w, " (%s)", s)
		}
		fmt.Fprintf(w, ".\n\n%s %s\n", r.Method, html.EscapeString(r.URL.RequestURI()))
		var keys []string
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
		}
	})
	return mux
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown protocol"
	}
	return s
}

// Options configure Run.
type Options struct {
	// StateDir holds the certificates; DefaultStateDir when empty.
	StateDir string
	// Listen and Admin are the gateway's and the admin listener's
	// addresses; free loopback ports when empty.
	Listen, Admin string
	// Out receives the instructions; Logger and AccessLog go to
	// proxy.Options.
	Out       io.Writer
	Logger    *slog.Logger
	AccessLog *slog.Logger
	// ProbeCommand is how the user runs gmgate ("gmgate", or
	// "go run ./cmd/gmgate").
	ProbeCommand string
	// Upstream, when set, is the user's service to front instead of the
	// built-in backend: http://host:port, https://host:port, or host:port
	// for plain HTTP. The configuration is then written to ConfigFile in
	// the state directory.
	Upstream string
	// Started, when set, is called with the running gateway.
	Started func(*proxy.Server)
}

// ConfigFile is the name of the configuration --upstream writes in the
// state directory.
const ConfigFile = "gmgate.yaml"

// Run starts the backend (or takes the user's) and the gateway, prints how
// to reach them, and serves until ctx is done, then drains.
func Run(ctx context.Context, o Options) error {
	upstream := ""
	if o.Upstream != "" {
		var err error
		if upstream, err = UpstreamURL(o.Upstream); err != nil {
			return err
		}
	}
	if o.StateDir == "" {
		dir, err := DefaultStateDir()
		if err != nil {
			return err
		}
		o.StateDir = dir
	}
	dir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	o.StateDir = dir
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Admin == "" {
		o.Admin = "127.0.0.1:0"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ProbeCommand == "" {
		o.ProbeCommand = "gmgate"
	}
	if upstream != "" {
		// Before anything starts: a file the user edited is theirs.
		if err := checkConfigUnedited(filepath.Join(o.StateDir, ConfigFile)); err != nil {
			return err
		}
	}
	st, err := Prepare(o.StateDir)
	if err != nil {
		return err
	}
	tokenFile, err := st.adminToken(o.Admin)
	if err != nil {
		return err
	}

	var cfg, file *config.Config
	if upstream == "" {
		backendLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		backend := &http.Server{Handler: Backend(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = backend.Serve(backendLn) }()
		defer backend.Close()
		cfg = st.Config(o.Listen, o.Admin, "http://"+backendLn.Addr().String())
	} else {
		file = st.UpstreamConfig(o.Listen, o.Admin, upstream)
		cfg = st.UpstreamConfig(o.Listen, o.Admin, upstream)
		config.Defaults(cfg)
		file.Admin.TokenFile = tokenFile
	}
	cfg.Admin.TokenFile = tokenFile
	srv, err := proxy.New(cfg, proxy.Options{Logger: o.Logger, AccessLog: o.AccessLog})
	if err != nil {
		return err
	}
	srv.Start()
	gw, admin := srv.Addr(cfg.Listeners[0].Name), srv.AdminAddr()
	if file != nil {
		// The file names the addresses bound, so that it serves the same.
		file.Listeners[0].Listen, file.Admin.Listen = gw.String(), admin.String()
		path, err := writeConfig(st.Dir, file, upstream)
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			return err
		}
		st.printInstructions(o.Out, instructions{probeCmd: o.ProbeCommand, gw: gw, admin: admin, upstream: upstream, cfgFile: path, tokenFile: tokenFile})
	} else {
		st.printInstructions(o.Out, instructions{probeCmd: o.ProbeCommand, gw: gw, admin: admin, tokenFile: tokenFile})
	}
	if o.Started != nil {
		o.Started(srv)
	}

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Timeouts.Shutdown.D())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// UpstreamURL checks --upstream and completes host:port to
// http://host:port.
func UpstreamURL(s string) (string, error) {
	u := strings.TrimSpace(s)
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	t, err := config.ParseTarget(u)
	if err != nil {
		return "", fmt.Errorf("--upstream: %v", err)
	}
	if t.Scheme != "http" && t.Scheme != "https" {
		return "", fmt.Errorf("--upstream %s: the quick start fronts an HTTP service (http:// or https://); for a TCP service write a configuration (gmgate config show prints an example)", s)
	}
	if strings.HasPrefix(t.Host, ":") {
		t.Host = "127.0.0.1" + t.Host
	}
	return t.Scheme + "://" + t.Host, nil
}

// checksumLine starts the last header line of the file --upstream
// writes; it carries the SHA-256 of the lines after it, so that a later
// --upstream can tell whether the user has edited the file since.
const checksumLine = "# quick-start checksum (gmgate serve --upstream rewrites the file only while it matches): "

// checkConfigUnedited refuses to let --upstream overwrite path when it
// exists and is not as an earlier --upstream wrote it: edited since, or
// written by someone else.
func checkConfigUnedited(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if head, rest, ok := bytes.Cut(data, []byte(checksumLine)); ok {
		if sum, body, ok := bytes.Cut(rest, []byte("\n")); ok && string(sum) == checksum(head, body) {
			return nil
		}
	}
	return fmt.Errorf("%s has changed since gmgate serve --upstream wrote it, and --upstream would write it anew: serve your file with gmgate serve -c %s, or move it away to start the quick start afresh", path, path)
}

// checksum is the SHA-256 of the file but its checksum line.
func checksum(head, body []byte) string {
	h := sha256.New()
	h.Write(head)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// writeConfig writes the quick start's configuration to dir/ConfigFile
// and returns its path.
func writeConfig(dir string, cfg *config.Config, upstream string) (string, error) {
	body, err := config.ShowSet(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, ConfigFile)
	head := fmt.Sprintf("# gmgate in front of %s, as gmgate serve --upstream ran it.\n# Serve it again with: gmgate serve -c %s\n# Every default is spelled out by: gmgate config show -c %s\n", upstream, path, path)
	head += checksumLine + checksum([]byte(head), body) + "\n"
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(head), body...), 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// instructions are what Run prints: the gateway, how to reach it, and
// for --upstream where its configuration is.
type instructions struct {
	probeCmd  string
	gw, admin net.Addr
	// upstream and cfgFile are set for --upstream.
	upstream, cfgFile string
	// tokenFile holds the admin token when the admin listener is off
	// loopback.
	tokenFile string
}

func (st *State) printInstructions(w io.Writer, in instructions) {
	made := "reused"
	if st.Created {
		made = "created"
	}
	port := in.gw.(*net.TCPAddr).Port
	head := fmt.Sprintf("gmgate demo: TLCP and TLS on %s, in front of a built-in backend.", in.gw)
	var note, file string
	if in.upstream != "" {
		head = fmt.Sprintf("gmgate: TLCP and TLS on %s, in front of %s.", in.gw, in.upstream)
		if u, err := url.Parse(in.upstream); err == nil {
			if c, err := net.DialTimeout("tcp", u.Host, time.Second); err != nil {
				note = fmt.Sprintf("\nNothing answers at %s yet: gmgate answers 502 until it does.\n", in.upstream)
			} else {
				c.Close()
			}
		}
		file = fmt.Sprintf("The same gateway from a file, to edit and keep:\n  %s\n  %s serve -c %s\n\n", in.cfgFile, in.probeCmd, shellQuote(in.cfgFile))
	}
	if in.tokenFile != "" {
		file = fmt.Sprintf("The admin listener is not on loopback: the console asks for the token in\n  %s\n(curl -H \"Authorization: Bearer $(cat %s)\" http://%s/metrics)\n\n", in.tokenFile, shellQuote(in.tokenFile), in.admin) + file
	}
	fmt.Fprintf(w, `
%s
Certificates (%s): %s
%s
Reach it with TLCP:
  %s probe --ca %s https://127.0.0.1:%d/

Reach it with TLS:
  curl --cacert %s https://127.0.0.1:%d/

Console: http://%s/console/
Metrics: http://%s/metrics   API: http://%s/api/v1/

%sStop with Ctrl-C.

`, head, made, st.Dir, note, in.probeCmd, shellQuote(st.Dual.CACert), port, shellQuote(st.TLSCA), port, in.admin, in.admin, in.admin, file)
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>()*?[]#~!{}") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// adminTokenFile is the admin token's file in the state directory, made
// when the admin listener is off loopback.
const adminTokenFile = "admin.token"

// adminToken returns the file of the admin listener's token when admin
// is off loopback (config check and serve refuse such a listener
// without access control): a random token made once and kept in the
// state directory, readable by the user only. "" on loopback.
func (st *State) adminToken(admin string) (string, error) {
	if config.AdminLoopback(admin) {
		return "", nil
	}
	path := filepath.Join(st.Dir, adminTokenFile)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("the admin token: %w", err)
	}
	return path, nil
}

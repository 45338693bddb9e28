package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/acme"
	"github.com/gmgate/gmgate/config"
	"golang.org/x/sys/unix"
)

// acmeSite is the ACME manager of one tls or auto listener. A reload
// that leaves the listener's ACME settings alone keeps it, with its
// renewal schedule.
type acmeSite struct {
	spec acmeSpec
	mgr  *acme.Manager
	// listener answers the TLS-ALPN-01 challenges.
	listener string
	started  bool
}

// acmeSpec is what an acmeSite is made from.
type acmeSpec struct {
	acme     config.ACME
	stateDir string
	// store is the shared store's id with acme.shared.
	store uint64
	// noStapling is tls.ocsp_stapling: false.
	noStapling bool
}

// acmeDir is where ACME state lives under the state directory.
func acmeDir(stateDir string) string { return filepath.Join(stateDir, "acme") }

// checkStateDir reports whether gmgate could create and write the ACME
// state directory, without creating anything.
func checkStateDir(stateDir string) error {
	dir := acmeDir(stateDir)
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory", p)
			}
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("%s is not writable by this user: %w", p, err)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) || filepath.Dir(p) == p {
			return err
		}
	}
}

// acmeSites checks and (unless checking) makes the ACME managers of cfg,
// reusing those of prev whose settings did not change.
func (s *Server) acmeSites(cfg *config.Config, prev *generation, gen *generation, check bool) []config.Problem {
	var probs []config.Problem
	stateChecked := false
	for _, sp := range tlsSites(cfg) {
		if !sp.servesTLS() || sp.cfg.TLS.ACME == nil {
			continue
		}
		name := sp.source()
		p := config.Field(sp.cfg.Path(), "tls.acme")
		spec := acmeSpec{acme: *sp.cfg.TLS.ACME, stateDir: cfg.StateDir, noStapling: !sp.cfg.TLS.Staples()}
		var storage *acme.RedisStorage
		if spec.acme.Shared {
			// In the session store: no state directory is used. The
			// store's problems are reported with it; a check, which
			// makes no store, still checks the rest.
			if gen.shared == nil && !check {
				continue
			}
			spec.stateDir = ""
			if gen.shared != nil {
				spec.store = gen.shared.id
				storage = gen.shared.acmeStorage()
			}
		}
		if prev != nil {
			if old, ok := prev.acme[name]; ok && reflect.DeepEqual(old.spec, spec) && old.listener == sp.lc.Name {
				gen.acme[name] = old
				continue
			}
		}
		if !stateChecked && !spec.acme.Shared {
			stateChecked = true
			if err := checkStateDir(cfg.StateDir); err != nil {
				probs = append(probs, cfg.Problem("state_dir", "ACME cannot keep its account and certificates under "+acmeDir(cfg.StateDir)+": "+err.Error(), "create the directory writable by the user gmgate runs as, or set state_dir to one that is"))
			}
		}
		var roots *x509.CertPool
		if ca := spec.acme.CARoot; ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				probs = append(probs, cfg.Problem(p+".ca_root", err.Error(), "give the PEM file of the CA that issued the ACME server's HTTPS certificate"))
				continue
			}
			if roots, err = certs.TLSCAPool(ca, pem); err != nil {
				probs = append(probs, cfg.Problem(p+".ca_root", err.Error(), "give the PEM file of the CA that issued the ACME server's HTTPS certificate"))
				continue
			}
		}
		if check || len(probs) > 0 {
			continue
		}
		if storage == nil {
			if err := os.MkdirAll(acmeDir(cfg.StateDir), 0o700); err != nil {
				probs = append(probs, cfg.Problem("state_dir", err.Error(), "create the directory writable by the user gmgate runs as, or set state_dir to one that is"))
				continue
			}
		}
		opts := acme.Options{
			Name:                    name,
			StateDir:                cfg.StateDir,
			Domains:                 spec.acme.Domains,
			DirectoryURL:            spec.acme.CA,
			Email:                   spec.acme.Email,
			TrustedRoots:            roots,
			DisableHTTPChallenge:    !slices.Contains(spec.acme.Challenges, config.ChallengeHTTP01),
			DisableTLSALPNChallenge: !slices.Contains(spec.acme.Challenges, config.ChallengeTLSALPN01),
			KeyType:                 spec.acme.KeyType,
			DisableOCSPStapling:     spec.noStapling,
			Logger:                  s.log,
		}
		if storage != nil {
			opts.Storage = storage
		}
		mgr, err := acme.New(opts)
		if err != nil {
			probs = append(probs, cfg.Problem(p, err.Error(), ""))
			continue
		}
		gen.acme[name] = &acmeSite{spec: spec, mgr: mgr, listener: sp.lc.Name}
	}
	return probs
}

// startACME starts the managers of g that are new, now that the
// listeners that answer their challenges are bound.
func (s *Server) startACME(g *generation) {
	httpPort := 0
	for _, lc := range g.cfg.Listeners {
		if lc.Protocol == config.ProtocolHTTP {
			httpPort = s.boundPort(lc.Name)
			break
		}
	}
	for name, site := range g.acme {
		if site.started {
			continue
		}
		site.started = true
		site.mgr.SetChallengePorts(httpPort, s.boundPort(site.listener))
		if err := site.mgr.Start(context.Background()); err != nil {
			s.log.Error("ACME could not start; the site serves no TLS certificate until it does", "listener", site.listener, "name", name, "cause", err.Error())
			continue
		}
		s.log.Info("ACME manages the TLS certificate", "listener", site.listener, "name", name, "domains", site.mgr.Domains(), "ca", site.spec.acme.CA)
	}
}

// boundPort returns the port the named listener is bound to (0 when it
// is not bound); called with s.mu held or before Start.
func (s *Server) boundPort(name string) int {
	if rl, ok := s.listeners[name]; ok {
		if a, ok := rl.ln.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	return 0
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/gmgate/gmgate/config"
)

// Run serves the configuration file at path until ctx is done, then
// shuts down gracefully within timeouts.shutdown. A value on reload (sent
// on SIGHUP) or a change of the file reloads the configuration and the
// certificates; a configuration that does not load is logged and the
// running one stays. It returns without serving when the file has
// problems or any listener cannot be set up.
func Run(ctx context.Context, path string, reload <-chan struct{}, opts Options) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	s, err := New(cfg, opts)
	if err != nil {
		return err
	}
	s.Start()
	for name, rl := range s.listeners {
		s.log.Info("listening", "listener", name, "addr", rl.ln.Addr().String(), "protocol", rl.state.Load().protocol)
	}
	if opts.Started != nil {
		opts.Started(s)
	}

	changed := make(chan struct{}, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		if err := watchFile(watchCtx, path, changed); err != nil {
			s.log.Warn("the configuration file is not watched; reload with SIGHUP", "cause", err.Error())
		}
	}()

	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), s.gen.cfg.Timeouts.Shutdown.D())
			err := s.Shutdown(sctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				// Connections were cut at the deadline; that is the
				// configured behaviour, not a failure.
				return nil
			}
			return err
		case <-reload:
			s.reloadFile(path)
		case <-changed:
			s.reloadFile(path)
		}
	}
}

// reloadFile loads the configuration again; the new generation reads the
// certificate files afresh, so this reloads certificates too.
func (s *Server) reloadFile(path string) {
	cfg, err := config.Load(path)
	if err != nil {
		s.metrics.reloads.WithLabelValues("failure").Inc()
		s.log.Error("reload failed; the previous configuration stays in service", "cause", err.Error())
		return
	}
	_ = s.Reload(cfg)
}

// watchFile signals changed when the file at path is written, replaced or
// renamed into place, debounced so that an editor's several writes make
// one reload.
func watchFile(ctx context.Context, path string, changed chan<- struct{}) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("watching %s: %w", filepath.Dir(abs), err)
	}
	const debounce = 300 * time.Millisecond
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == abs && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
				timer.Reset(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			return err
		case <-timer.C:
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
}

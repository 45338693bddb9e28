package proxy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/fsnotify/fsnotify"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/observe"
)

// Run serves the configuration file at path until ctx is done, then
// shuts down gracefully within timeouts.shutdown. A value on reload (sent
// on SIGHUP) reopens the access log and reloads the configuration and the
// certificates, as a change of the file does (without the reopen); a
// configuration that does not load is logged and the running one stays.
// A value on opts.ReopenLogs (SIGUSR1) reopens the access log. It returns
// without serving when the file has problems or any listener cannot be
// set up. Under systemd (Type=notify) it reports READY=1 once serving,
// RELOADING=1/READY=1 around reloads and STOPPING=1 when draining.
func Run(ctx context.Context, path string, reload <-chan struct{}, opts Options) error {
	// Watch before the first load, so that no change made after it (or
	// once the server has started) can go unnoticed.
	watcher, watchErr := newFileWatcher(path)
	if watcher != nil {
		defer watcher.Close()
	}
	cfg, err := loadFile(path, CheckOptions{Logger: opts.Logger})
	if err != nil {
		return err
	}
	s, err := New(cfg, opts)
	if err != nil {
		return err
	}
	s.history.path = path
	s.Start()
	for name, rl := range s.listeners {
		s.log.Info("listening", "listener", name, "addr", rl.ln.Addr().String(), "protocol", rl.state.Load().protocol)
	}
	warnCPU(s.log)
	if opts.Started != nil {
		opts.Started(s)
	}
	s.notify(daemon.SdNotifyReady)

	changed := make(chan struct{}, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	defer func() {
		stopWatch()
		<-watchDone
	}()
	if watchErr != nil {
		s.log.Warn("the configuration file is not watched; reload with SIGHUP", "cause", watchErr.Error())
		close(watchDone)
	} else {
		go func() {
			defer close(watchDone)
			if err := watcher.run(watchCtx, changed); err != nil {
				s.log.Warn("the configuration file is no longer watched; reload with SIGHUP", "cause", err.Error())
			}
		}()
	}

	for {
		select {
		case <-ctx.Done():
			s.notify(daemon.SdNotifyStopping)
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
			s.ReopenLogs()
			_ = s.reloadFile(path)
		case <-changed:
			_ = s.reloadFile(path)
		case <-opts.ReopenLogs:
			s.ReopenLogs()
		}
	}
}

// reloadFile loads the configuration again; the new generation reads the
// certificate files afresh, so this reloads certificates too.
func (s *Server) reloadFile(path string) error {
	s.notify(reloadingState())
	// The old configuration stays in service when the new one fails, so
	// the process is ready again either way.
	defer s.notify(daemon.SdNotifyReady)
	cfg, err := config.Load(path)
	if err != nil {
		s.metrics.Reloads.WithLabelValues("failure").Inc()
		s.log.Error("reload failed; the previous configuration stays in service", "cause", err.Error())
		s.history.note(err)
		return err
	}
	return s.Reload(cfg)
}

// fileWatcher watches one file through its directory, so that a file
// replaced by rename (as editors and configuration tools do) is seen too.
type fileWatcher struct {
	*fsnotify.Watcher
	abs string
}

func newFileWatcher(path string) (*fileWatcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching %s: %w", filepath.Dir(abs), err)
	}
	return &fileWatcher{Watcher: w, abs: abs}, nil
}

// run signals changed when the file is written, replaced or renamed into
// place, debounced so that an editor's several writes make one reload.
func (w *fileWatcher) run(ctx context.Context, changed chan<- struct{}) error {
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
			if filepath.Clean(ev.Name) == w.abs && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
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

// ReopenLogs reopens the access log file (SIGUSR1, SIGHUP), for log
// rotation. Logs to stdout, stderr or a logger given in Options are left
// alone.
func (s *Server) ReopenLogs() {
	af, ok := s.accessClose.(*observe.AccessFile)
	if !ok {
		return
	}
	// What waits belongs in the file being rotated away.
	s.access.Out.Flush()
	if err := af.Reopen(); err != nil {
		s.log.Error("the access log could not be reopened; lines go to the old file", "path", af.Path, "cause", err.Error())
		return
	}
	s.log.Info("access log reopened", "path", af.Path)
}

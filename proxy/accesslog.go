package proxy

import (
	"os"
	"sync"
)

// accessFile is the access log file. Reopen opens the path again, so that
// after logrotate renamed the file, lines go to a new file of the
// configured name.
type accessFile struct {
	path string
	mu   sync.RWMutex
	f    *os.File
}

func openAccessFile(path string) (*accessFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	return &accessFile{path: path, f: f}, nil
}

func (a *accessFile) Write(b []byte) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.f.Write(b)
}

// Reopen switches to a newly opened file of the same name; on failure the
// old file stays in use.
func (a *accessFile) Reopen() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.f
	a.f = f
	a.mu.Unlock()
	return old.Close()
}

func (a *accessFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

// ReopenLogs reopens the access log file (SIGUSR1, SIGHUP), for log
// rotation. Logs to stdout, stderr or a logger given in Options are left
// alone.
func (s *Server) ReopenLogs() {
	af, ok := s.accessClose.(*accessFile)
	if !ok {
		return
	}
	if err := af.Reopen(); err != nil {
		s.log.Error("the access log could not be reopened; lines go to the old file", "path", af.path, "cause", err.Error())
		return
	}
	s.log.Info("access log reopened", "path", af.path)
}

//go:build !linux

package proxy

// monotonicUsec is not known outside Linux, where systemd does not run.
func monotonicUsec() (int64, bool) { return 0, false }

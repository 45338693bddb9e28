package tcplisten

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// listenConfig sets the options on the listening socket, before bind and
// listen, and tells the net package not to set keep-alive again on each
// accepted connection.
func listenConfig(c Config) *net.ListenConfig {
	return &net.ListenConfig{
		KeepAlive: -1,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = setOptions(int(fd), c)
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
}

type sockopt struct {
	level, name, value int
	what               string
}

func setOptions(fd int, c Config) error {
	var opts []sockopt
	if ka := c.KeepAlive; ka.Enable {
		opts = append(opts,
			sockopt{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
			sockopt{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, seconds(ka.Idle), "TCP_KEEPIDLE"},
			sockopt{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, seconds(ka.Interval), "TCP_KEEPINTVL"},
			sockopt{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, max(ka.Count, 1), "TCP_KEEPCNT"},
		)
	}
	if c.DeferAccept > 0 {
		opts = append(opts, sockopt{syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, seconds(c.DeferAccept), "TCP_DEFER_ACCEPT"})
	}
	for _, o := range opts {
		if err := syscall.SetsockoptInt(fd, o.level, o.name, o.value); err != nil {
			return &net.OpError{Op: "setsockopt " + o.what, Net: "tcp", Err: err}
		}
	}
	return nil
}

// SetDeferAccept changes the deferred accept of a listening socket ln
// (from Listen): d as Config.DeferAccept, none when d is not positive.
func SetDeferAccept(ln net.Listener, d time.Duration) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%T has no socket", ln)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	v := 0
	if d > 0 {
		v = seconds(d)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, v)
	}); err != nil {
		return err
	}
	if serr != nil {
		return &net.OpError{Op: "setsockopt TCP_DEFER_ACCEPT", Net: "tcp", Err: serr}
	}
	return nil
}

// seconds rounds d up to whole seconds, at least one, as the socket
// options take them.
func seconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

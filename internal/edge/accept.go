package edge

import (
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/gmgate/gmgate/internal/connworkers"
)

// AcceptLoop accepts connections on ln until it is closed. admit decides
// on each: it returns what serves the connection, run on a goroutine kept
// for the next one (a new goroutine's stack grows to a handshake's depth
// every time), or nil when it refused it. A failing Accept (out of file
// descriptors and the like) is retried after a pause that grows to a
// second, as net/http does, rather than spinning.
func AcceptLoop(ln net.Listener, log *slog.Logger, listener string, admit func(net.Conn) func()) {
	workers := connworkers.New()
	defer workers.Stop()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			log.Warn("accept failed", "listener", listener, "cause", err.Error(), "retry_in", delay.String())
			time.Sleep(delay)
			continue
		}
		delay = 0
		if run := admit(c); run != nil {
			workers.Run(run)
		}
	}
}

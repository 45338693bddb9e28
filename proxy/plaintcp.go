package proxy

import (
	"net"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/forward"
)

// servePlainTCP forwards a connection of a tcp listener whole to its
// route's upstream (tcp:// or tlcp://): local applications that cannot
// speak TLCP reach a TLCP-only service through it. There is no handshake
// and no host to match.
func (s *Server) servePlainTCP(rl *runningListener, st *listenerState, conn net.Conn, client net.Addr) {
	_ = conn.SetDeadline(time.Time{})
	info := &forward.ConnInfo{Listener: rl.name, Client: client, Protocol: "tcp", Site: config.DefaultSiteName}
	// The listener's one site, which answers for every name.
	rt := st.sites.All.Lookup("").Router.Match("", "", true)
	if rt == nil {
		conn.Close()
		return
	}
	s.fwd.TCP(rt.Upstream, conn, info, st.upstreamDial, st.idle)
}

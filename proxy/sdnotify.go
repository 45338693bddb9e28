package proxy

import (
	"strconv"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify tells systemd (Type=notify) what the process is doing, through
// the datagram socket in $NOTIFY_SOCKET; without it, it does nothing.
// States: READY=1 once every listener is bound and served, RELOADING=1
// and READY=1 around a reload, STOPPING=1 when draining begins.
func (s *Server) notify(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		s.log.Warn("systemd notification failed", "state", state, "cause", err.Error())
	}
}

// reloadingState is RELOADING=1 with the time systemd (253 and later)
// wants to tell this reload from an older one.
func reloadingState() string {
	state := daemon.SdNotifyReloading
	if usec, ok := monotonicUsec(); ok {
		state += "\nMONOTONIC_USEC=" + strconv.FormatInt(usec, 10)
	}
	return state
}

package proxy

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/route"
)

// plainHTTP is what an http listener does besides routing: it answers
// ACME HTTP-01 challenges, and with redirect_https it sends every other
// request to the HTTPS port.
//
// An http listener otherwise routes like any listener, so it also serves
// local applications that speak plain HTTP to gmgate (on loopback), which
// then forwards to upstreams of any scheme.
type plainHTTP struct {
	// redirectPort is the HTTPS port redirects go to ("" for none).
	redirectPort string
	// acme answer HTTP-01 challenges.
	acme []*certs.ACME
}

func newPlainHTTP(lc config.Listener, gen *generation) *plainHTTP {
	p := &plainHTTP{}
	if lc.RedirectHTTPS {
		p.redirectPort, _ = gen.cfg.HTTPSPort()
	}
	for _, site := range gen.acme {
		if slices.Contains(site.spec.acme.Challenges, config.ChallengeHTTP01) {
			p.acme = append(p.acme, site.mgr)
		}
	}
	return p
}

// intercept answers r when it is an ACME challenge or redirected to
// HTTPS, and reports whether it did.
func (p *plainHTTP) intercept(w http.ResponseWriter, r *http.Request, host route.Host) bool {
	for _, a := range p.acme {
		if a.HandleHTTPChallenge(w, r) {
			return true
		}
	}
	if p.redirectPort == "" {
		return false
	}
	if host.Name == "" {
		plainError(w, http.StatusBadRequest, "the request names no host to redirect to")
		return true
	}
	authority := host.Name // an IPv6 address in its brackets
	if p.redirectPort != "443" {
		authority += ":" + p.redirectPort
	}
	w.Header().Set("Location", "https://"+authority+r.URL.RequestURI())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMovedPermanently)
	_, _ = w.Write([]byte("Moved to HTTPS.\n"))
	return true
}

// servePlainHTTP hands a connection of an http listener to its HTTP
// server: there is no handshake to make.
func (s *Server) servePlainHTTP(rl *runningListener, conn net.Conn, client net.Addr) {
	_ = conn.SetDeadline(time.Time{})
	info := &connInfo{listener: rl.name, client: client, protocol: "http", site: config.DefaultSiteName}
	st := rl.state.Load()
	hc := &httpConn{Conn: conn, info: info, write: writeBound{timeout: st.idle}}
	if !rl.httpConns.push(hc) {
		hc.Close()
	}
}

// resolveRedirectPorts gives redirects to a listener configured on port 0
// (any free port) the port it was bound to; bound finds a bound listener
// by name.
func resolveRedirectPorts(gen *generation, bound func(name string) *runningListener) {
	name := ""
	for _, lc := range gen.cfg.Listeners {
		if lc.Protocol == config.ProtocolTLS || lc.Protocol == config.ProtocolAuto {
			name = lc.Name
			break
		}
	}
	for _, st := range gen.states {
		if st.plain == nil || st.plain.redirectPort != "0" {
			continue
		}
		if rl := bound(name); rl != nil {
			if a, ok := rl.ln.Addr().(*net.TCPAddr); ok {
				st.plain.redirectPort = strconv.Itoa(a.Port)
			}
		}
	}
}

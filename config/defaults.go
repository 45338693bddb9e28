package config

import (
	"strconv"
	"time"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// Default values, applied by Defaults.
const (
	DefaultAdminListen      = "127.0.0.1:9180"
	DefaultMaxConnections   = 10000
	DefaultMaxHandshakes    = 256
	DefaultHandshakeWait    = 250 * time.Millisecond
	DefaultMaxHeaderBytes   = 64 << 10
	DefaultMaxRespHeader    = 64 << 10
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultClientHello      = 5 * time.Second
	DefaultReadHeader       = 10 * time.Second
	DefaultRequestBody      = 30 * time.Second
	// DefaultRequestBodyMinRate is the average a request body must keep,
	// in bytes a second (Apache's mod_reqtimeout MinRate).
	DefaultRequestBodyMinRate = 500
	DefaultIdle               = 2 * time.Minute
	DefaultUpstreamConnect    = 5 * time.Second
	DefaultUpstreamResponse   = time.Minute
	DefaultShutdown           = 30 * time.Second
	DefaultHealthInterval     = 5 * time.Second
	DefaultHealthTimeout      = 2 * time.Second
	DefaultHealthFails        = 2
	DefaultHealthPasses       = 1
	DefaultPassiveMaxFails    = 3
	DefaultEjectFor           = 30 * time.Second
	DefaultPanicThreshold     = 50
	DefaultRetries            = 1
	// DefaultQueueTimeout is how long a request waits for a connection
	// to a target when all of max_conns_per_target are in use.
	DefaultQueueTimeout = 5 * time.Second
	// DefaultUpstreamSessions is the size of a tlcp:// upstream's client
	// session cache: one session per target is kept.
	DefaultUpstreamSessions = 256
	// DefaultUpstreamProfile is the client profile of tlcp:// upstreams.
	DefaultUpstreamProfile = tlcp.ProfileStandard
	// UpstreamProfileAuto tries the standard profile with each target and
	// the gmssl profile where the target refuses the standard one's
	// answer to its CertificateRequest, and remembers which one worked.
	// Not the default: a target that refuses the client certificate
	// itself would cost two handshakes per connection.
	UpstreamProfileAuto = "auto"
	// DefaultClientVerifiedHeader is the client_verified session header
	// of a listener that names a client identity header and not this one.
	DefaultClientVerifiedHeader = "X-TLCP-Client-Verified"
	// DefaultClientCertMaxBytes bounds a certificate header's value: with
	// the header's name it stays within the 8 KiB that nginx (and many
	// servers behind gmgate) accept for one header line.
	DefaultClientCertMaxBytes = 8000
	// MaxSessionCacheSize bounds tlcp.session_cache.size: the cache's
	// table is allocated whole when it keeps its first session, about 150
	// bytes a session.
	MaxSessionCacheSize = 1000000
	// MaxSessionLifetime bounds tlcp.session_cache.lifetime (RFC 5246
	// advises at most a day).
	MaxSessionLifetime = 24 * time.Hour
	// DefaultStateDir is where the systemd unit (StateDirectory=) and the
	// container image keep gmgate's state.
	DefaultStateDir = "/var/lib/gmgate"
	// DefaultACMECA is Let's Encrypt's production directory.
	DefaultACMECA      = "https://acme-v02.api.letsencrypt.org/directory"
	DefaultACMEKeyType = "p256"
	// DefaultRevocationRefresh is how often CRLs are read again.
	DefaultRevocationRefresh = time.Hour
	// DefaultRevocationGrace is how long a CRL or OCSP answer past its
	// nextUpdate still serves while its source cannot be read.
	DefaultRevocationGrace = time.Hour
	// DefaultRevocationPolicy refuses certificates whose revocation
	// status is unknown.
	DefaultRevocationPolicy = RevocationFailClosed
)

// Defaults fills in every value the file leaves out. It is the only place
// defaults are set; `gmgate config show` prints its result.
func Defaults(c *Config) {
	defer c.numberPaths()
	setString(&c.StateDir, DefaultStateDir)
	setString(&c.Admin.Listen, DefaultAdminListen)
	setString(&c.Log.Level, "info")
	setString(&c.Log.Access, "stdout")

	setInt(&c.Limits.MaxConnections, DefaultMaxConnections)
	setInt(&c.Limits.MaxHandshakes, DefaultMaxHandshakes)
	setDuration(&c.Limits.HandshakeWait, DefaultHandshakeWait)
	setInt(&c.Limits.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setInt(&c.Limits.MaxResponseHeaderBytes, DefaultMaxRespHeader)

	setDuration(&c.Timeouts.Handshake, DefaultHandshakeTimeout)
	setDuration(&c.Timeouts.ClientHello, DefaultClientHello)
	setDuration(&c.Timeouts.ReadHeader, DefaultReadHeader)
	setDuration(&c.Timeouts.RequestBody, DefaultRequestBody)
	setIntPtr(&c.Timeouts.RequestBodyMinRate, DefaultRequestBodyMinRate)
	setDuration(&c.Timeouts.Idle, DefaultIdle)
	setDuration(&c.Timeouts.UpstreamConnect, DefaultUpstreamConnect)
	setDuration(&c.Timeouts.UpstreamResponse, DefaultUpstreamResponse)
	setDuration(&c.Timeouts.Shutdown, DefaultShutdown)

	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Protocol == "" {
			hasTLCP, hasTLS := false, false
			for _, site := range l.SiteList() {
				hasTLCP = hasTLCP || site.TLCP != nil
				hasTLS = hasTLS || site.TLS != nil
			}
			switch {
			case hasTLCP && hasTLS:
				l.Protocol = ProtocolAuto
			case hasTLS:
				l.Protocol = ProtocolTLS
			case !hasTLCP && l.RedirectHTTPS:
				l.Protocol = ProtocolHTTP
			default:
				l.Protocol = ProtocolTLCP
			}
		}
		if l.Name == "" {
			l.Name = "listener" + strconv.Itoa(i)
		}
		if l.HTTP2 == nil && l.Protocol != ProtocolHTTP && l.Protocol != ProtocolTCP {
			on := true
			l.HTTP2 = &on
		}
	}
	// A second pass: ACME's default challenges depend on the protocols
	// of every listener.
	for i := range c.Listeners {
		l := &c.Listeners[i]
		defaultHeaders(&l.SessionHeaders)
		if len(l.Sites) == 0 {
			c.defaultSite(l.TLCP, l.TLS, l.Routes)
			defaultGMCapable(l.Protocol, l.TLCP, &l.GMCapableTLSClients)
			continue
		}
		for j := range l.Sites {
			site := &l.Sites[j]
			c.defaultSite(site.TLCP, site.TLS, site.Routes)
			defaultGMCapable(l.Protocol, site.TLCP, &site.GMCapableTLSClients)
			if site.SessionHeaders == nil {
				h := l.SessionHeaders
				site.SessionHeaders = &h
			}
			defaultHeaders(site.SessionHeaders)
		}
	}
	c.sessionStoreDefaults()
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		setString(&u.Policy, PolicyRoundRobin)
		setDuration(&u.Health.Interval, DefaultHealthInterval)
		setDuration(&u.Health.Timeout, DefaultHealthTimeout)
		setInt(&u.Health.Fails, DefaultHealthFails)
		setInt(&u.Health.Passes, DefaultHealthPasses)
		setIntPtr(&u.Passive.MaxFails, DefaultPassiveMaxFails)
		setDuration(&u.Passive.EjectFor, DefaultEjectFor)
		setIntPtr(&u.Passive.PanicThreshold, DefaultPanicThreshold)
		setIntPtr(&u.Retries, DefaultRetries)
		if u.Scheme() != "tcp" && c.Limits.MaxConnections > 0 {
			// As many connections to a target as one listener's HTTP/1.1
			// clients could make; HTTP/2 clients, with up to 128 requests
			// a connection, no more than that.
			setIntPtr(&u.MaxConnsPerTarget, c.Limits.MaxConnections)
			setIntPtr(&u.QueueSize, *u.MaxConnsPerTarget)
			setDuration(&u.QueueTimeout, DefaultQueueTimeout)
		}
		u.tls13SMDefaults()
		if t := u.TLCP; t != nil {
			if len(t.Suites) == 0 {
				// The ECDHE suites need the client's encryption pair.
				t.SuitesDefaulted = true
				for _, id := range tlcp.DefaultCipherSuites {
					if !isECDHE(id) || t.HasEncPair() {
						t.Suites = append(t.Suites, tlcp.CipherSuiteName(id))
					}
				}
			}
			setString(&t.Profile, DefaultUpstreamProfile)
			if t.SessionCache == nil {
				t.SessionCache = &SessionCache{}
			}
			setIntPtr(&t.SessionCache.Size, DefaultUpstreamSessions)
			setDuration(&t.SessionCache.Lifetime, tlcp.DefaultSessionLifetime)
			revocationDefaults(t.Revocation)
		}
		if t := u.TLS; t != nil {
			revocationDefaults(t.Revocation)
		}
	}
}

// revocationDefaults fills in a revocation section that is present.
func revocationDefaults(r *Revocation) {
	if r == nil {
		return
	}
	setString(&r.OCSP, RevocationOCSPOff)
	setDuration(&r.Refresh, DefaultRevocationRefresh)
	if r.Grace == nil {
		g := Duration(DefaultRevocationGrace)
		r.Grace = &g
	}
	setString(&r.Policy, DefaultRevocationPolicy)
}

// defaultSite fills in the defaults of one site's identity and routes.
func (c *Config) defaultSite(tc *TLCP, tl *TLS, routes []Route) {
	if tc != nil {
		if len(tc.Suites) == 0 {
			tc.SuitesDefaulted = true
			for _, id := range tlcp.DefaultCipherSuites {
				tc.Suites = append(tc.Suites, tlcp.CipherSuiteName(id))
			}
		}
		setString(&tc.ClientAuth, "none")
		setString(&tc.TLS13ShangMi, TLS13ShangMiPrefer)
		if len(tc.TLS13Groups) == 0 {
			for _, g := range tls13.DefaultCurvePreferences {
				tc.TLS13Groups = append(tc.TLS13Groups, g.String())
			}
		}
		if tc.SessionCache == nil {
			tc.SessionCache = &SessionCache{}
		}
		setIntPtr(&tc.SessionCache.Size, tlcp.DefaultSessionCacheSize)
		setDuration(&tc.SessionCache.Lifetime, tlcp.DefaultSessionLifetime)
		revocationDefaults(tc.ClientRevocation)
		if tc.OCSPStapling == nil {
			on := true
			tc.OCSPStapling = &on
		}
	}
	if tl != nil {
		setString(&tl.MinVersion, "1.2")
		setString(&tl.ClientAuth, "none")
		revocationDefaults(tl.ClientRevocation)
		if tl.OCSPStapling == nil {
			on := true
			tl.OCSPStapling = &on
		}
		if sm := tl.SM2; sm != nil {
			setString(&sm.TLS13ShangMi, TLS13ShangMiPrefer)
			if len(sm.TLS13Groups) == 0 {
				for _, g := range tls13.DefaultCurvePreferences {
					sm.TLS13Groups = append(sm.TLS13Groups, g.String())
				}
			}
		}
		if a := tl.ACME; a != nil {
			setString(&a.CA, DefaultACMECA)
			setString(&a.KeyType, DefaultACMEKeyType)
			if len(a.Challenges) == 0 {
				a.Challenges = []string{ChallengeTLSALPN01}
				if c.hasHTTPListener() {
					a.Challenges = append([]string{ChallengeHTTP01}, a.Challenges...)
				}
			}
		}
	}
	for j := range routes {
		setString(&routes[j].Path, "/")
	}
}

func defaultHeaders(h *SessionHeaders) {
	if h.HasClientIdentity() {
		// An upstream that reads who the client is should also learn
		// whether anyone vouched for it.
		setString(&h.ClientVerified, DefaultClientVerifiedHeader)
	}
	if h.HasClientCerts() {
		setInt(&h.ClientCertMaxBytes, DefaultClientCertMaxBytes)
	}
}

func (c *Config) hasHTTPListener() bool {
	for _, l := range c.Listeners {
		if l.Protocol == ProtocolHTTP {
			return true
		}
	}
	return false
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setIntPtr(p **int, v int) {
	if *p == nil {
		*p = &v
	}
}

func setDuration(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

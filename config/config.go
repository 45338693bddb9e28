// Package config is gmgate's configuration: the types of the YAML file,
// strict decoding (unknown keys are errors), validation that reports every
// problem at once with its line and field path, and the defaults, applied
// in one place (Defaults).
//
// The package reads the configuration file and nothing else: it does not
// open certificates or keys, resolve host names or listen on ports. Secrets
// are never part of the file; keys are named by reference (a path, or a
// file:/sdf: key reference whose password or PIN comes from an environment
// variable or a file).
package config

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration file.
type Config struct {
	// StateDir holds what gmgate writes for itself: the ACME account,
	// keys and certificates (under acme/).
	StateDir  string               `yaml:"state_dir"`
	Admin     Admin                `yaml:"admin"`
	Log       Log                  `yaml:"log"`
	Limits    Limits               `yaml:"limits"`
	Timeouts  Timeouts             `yaml:"timeouts"`
	Listeners []Listener           `yaml:"listeners"`
	Upstreams map[string]*Upstream `yaml:"upstreams"`
	// SessionStore is what replicas share through Redis (none when nil).
	SessionStore *SessionStore `yaml:"session_store,omitempty"`

	// File is the file the configuration was read from ("" when parsed
	// from memory without a name).
	File string `yaml:"-"`
	// idx maps field paths to lines of File, for problems found after
	// parsing (certificates, addresses).
	idx *nodeIndex
}

// Problem returns a problem at the field path, with the file and line it
// has in the configuration the problem belongs to.
func (c *Config) Problem(path, msg, fix string) Problem {
	return Problem{File: c.File, Line: c.idx.line(path), Path: path, Msg: msg, Fix: fix}
}

// InFile reports whether the configuration file sets the field at path
// ("timeouts.client_hello"), rather than leaving it to its default.
func (c *Config) InFile(path string) bool { return c.idx.has(path) }

// Admin is the listener for /metrics, /healthz, /readyz and, when Pprof is
// set, /debug/pprof/. The data plane never serves these.
type Admin struct {
	// Listen is host:port, or "off". Loopback by default.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/.
	Pprof bool `yaml:"pprof"`
	// TokenFile holds the bearer token the admin listener asks for
	// (everything but /healthz and /readyz); "" for none.
	TokenFile string `yaml:"token_file"`
	// Cert and Key make the admin listener speak TLS; with ClientCA it
	// asks for client certificates issued by that CA.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// TLCP makes the admin listener speak TLCP with this SM2 pair; with
	// Cert and Key too, each connection speaks what its first record
	// says. With ClientCA it asks TLCP clients for certificates too.
	TLCP     *AdminTLCP `yaml:"tlcp"`
	ClientCA string     `yaml:"client_ca"`
	// WriteActions turns on the API's write actions (reload, drain and
	// undrain an upstream target), for holders of the token only.
	WriteActions bool `yaml:"write_actions"`
}

// AdminTLCP is the admin listener's TLCP identity: a signing and an
// encryption certificate and key (files).
type AdminTLCP struct {
	SignCert string `yaml:"sign_cert"`
	SignKey  string `yaml:"sign_key"`
	EncCert  string `yaml:"enc_cert"`
	EncKey   string `yaml:"enc_key"`
}

// Log configures the process log and the access log.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Access is where access log lines go: stdout, stderr, off, or a file
	// path (appended to).
	Access string `yaml:"access"`
}

// Limits bound what the gateway holds at once.
type Limits struct {
	// MaxConnections is the number of client connections held at once,
	// per listener; more are closed as soon as they are accepted.
	MaxConnections int `yaml:"max_connections"`
	// MaxHandshakes is the number of handshakes in progress at once, per
	// listener. A connection takes a slot once its whole ClientHello has
	// arrived, so slow and silent clients hold none.
	MaxHandshakes int `yaml:"max_handshakes"`
	// HandshakeWait is how long a new connection waits for a handshake
	// slot before it is refused.
	HandshakeWait Duration `yaml:"handshake_wait"`
	// MaxHeaderBytes bounds the request header of an HTTP request.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxResponseHeaderBytes bounds the response header of an upstream.
	MaxResponseHeaderBytes int `yaml:"max_response_header_bytes"`
}

// Timeouts of the client and upstream sides.
type Timeouts struct {
	// Handshake bounds the PROXY header and the TLCP/TLS handshake.
	Handshake Duration `yaml:"handshake"`
	// ClientHello bounds the wait for a client's whole ClientHello, from
	// accept; no handshake slot is held meanwhile. Handshake bounds it
	// too.
	ClientHello Duration `yaml:"client_hello"`
	// ReadHeader bounds reading an HTTP request header.
	ReadHeader Duration `yaml:"read_header"`
	// RequestBody bounds the wait for each read of a request body: the
	// time a client may leave an upload idle, not its whole length.
	RequestBody Duration `yaml:"request_body"`
	// RequestBodyMinRate is the average rate, in bytes a second, a request
	// body must keep while gmgate waits for it, past a first RequestBody
	// of grace, until the response starts: a body that trickles (a byte
	// every few seconds, each within RequestBody) is cut. 0 turns it off.
	RequestBodyMinRate *int `yaml:"request_body_min_rate"`
	// Idle closes keep-alive client connections that stay idle this long
	// (and TCP-mode connections that move no byte this long).
	Idle Duration `yaml:"idle"`
	// UpstreamConnect bounds connecting to an upstream target and its TLS
	// handshake (a tlcp:// target's connect and TLCP handshake together).
	UpstreamConnect Duration `yaml:"upstream_connect"`
	// UpstreamResponse bounds waiting for an upstream's response header.
	UpstreamResponse Duration `yaml:"upstream_response"`
	// Shutdown is how long a graceful shutdown waits for requests and
	// connections in flight before it closes them.
	Shutdown Duration `yaml:"shutdown"`
}

// Listener protocols.
const (
	ProtocolTLCP = "tlcp"
	ProtocolTLS  = "tls"
	ProtocolAuto = "auto"
	// ProtocolHTTP is plain HTTP: the port-80 listener that redirects to
	// HTTPS and answers ACME HTTP-01 challenges, or a local listener that
	// forwards to upstreams.
	ProtocolHTTP = "http"
	// ProtocolTCP is a plain TCP listener whose connections go whole to a
	// tcp:// or tlcp:// upstream: local applications that cannot speak
	// TLCP reach a TLCP-only service through it.
	ProtocolTCP = "tcp"
)

// Listener is one address the gateway accepts clients on.
type Listener struct {
	Name string `yaml:"name"`
	// Listen is host:port.
	Listen string `yaml:"listen"`
	// Protocol is tlcp, tls, auto (both on one port, chosen by the
	// first record of each connection), http (plain HTTP) or tcp (plain
	// TCP, forwarded whole).
	Protocol string `yaml:"protocol"`
	// RedirectHTTPS answers every request of an http listener with a
	// redirect to the same host and path on the HTTPS port (the first tls
	// or auto listener's), except ACME HTTP-01 challenges.
	RedirectHTTPS bool           `yaml:"redirect_https"`
	ProxyProtocol *ProxyProtocol `yaml:"proxy_protocol"`
	// HTTP2 offers HTTP/2 (ALPN h2) to TLS clients and to TLCP clients
	// that ask for it, besides HTTP/1.1. On by default on tlcp, tls and
	// auto listeners.
	HTTP2 *bool `yaml:"http2"`
	// TLCP, TLS, Routes and SessionHeaders are the listener's one site
	// (the flat form): every client is served with them, whatever name it
	// asks for. A listener with several identities lists Sites instead.
	TLCP   *TLCP   `yaml:"tlcp"`
	TLS    *TLS    `yaml:"tls"`
	Routes []Route `yaml:"routes"`
	// SessionHeaders names request headers that describe the client's
	// TLCP/TLS session to the upstream; an empty name sends no header.
	// With Sites, they apply to every site that names none of its own.
	SessionHeaders SessionHeaders `yaml:"session_headers"`
	// SharedSessions shares the listener's TLCP sessions and TLS session
	// ticket keys with the other replicas through the session store (for
	// every site of the listener, each under its own context and keys).
	SharedSessions bool `yaml:"shared_sessions,omitempty"`
	// GMCapableTLSClients is the flat form's gm_capable_tls_clients
	// (Site.GMCapableTLSClients).
	GMCapableTLSClients string `yaml:"gm_capable_tls_clients,omitempty"`
	// Sites are the listener's identities, chosen by the name a client
	// asks for (SNI); each has its own certificates, client
	// authentication, sessions and routes.
	Sites []Site `yaml:"sites"`

	// path is the listener's field path (see Path).
	path string
}

// DefaultSiteName names the one site of a listener in the flat form, in
// metrics and the access log.
const DefaultSiteName = "default"

// Site is one identity of a listener: the host names it answers for, its
// TLCP and/or TLS certificates and client-authentication policy, and its
// routes.
type Site struct {
	// Name labels the site in metrics and logs.
	Name string `yaml:"name"`
	// Hosts are exact names (api.example.cn) and wildcards
	// (*.example.cn, any depth below example.cn). An exact name wins over
	// a wildcard, a longer wildcard over a shorter one.
	Hosts []string `yaml:"hosts"`
	// Default serves clients that send no server name (many TLCP clients
	// do not) or one that no site lists. Without a default site they get
	// the unrecognized_name alert.
	Default bool    `yaml:"default"`
	TLCP    *TLCP   `yaml:"tlcp"`
	TLS     *TLS    `yaml:"tls"`
	Routes  []Route `yaml:"routes"`
	// SessionHeaders replace the listener's session_headers for this
	// site.
	SessionHeaders *SessionHeaders `yaml:"session_headers"`
	// GMCapableTLSClients is what a TLS ClientHello offering TLCP suites
	// (a GM browser's first hello) gets from a site with a TLCP identity:
	// GMCapableTLCP (the default) or GMCapableTLS (gmcapable.go).
	GMCapableTLSClients string `yaml:"gm_capable_tls_clients,omitempty"`

	// Implicit marks the one site of the flat form, which answers for
	// every name and whose fields are the listener's.
	Implicit bool `yaml:"-"`

	// path is the site's field path (see Path).
	path string
}

// SiteList returns the listener's sites: Sites, or the one implicit site
// of the flat form, made of the listener-level fields.
func (l *Listener) SiteList() []Site {
	if len(l.Sites) > 0 {
		return l.Sites
	}
	return []Site{{
		Name: DefaultSiteName, Default: true, Implicit: true,
		TLCP: l.TLCP, TLS: l.TLS, Routes: l.Routes, SessionHeaders: &l.SessionHeaders,
		GMCapableTLSClients: l.GMCapableTLSClients,
		path:                l.path,
	}}
}

// SitePath is the field path of the listener's j-th site (from SiteList)
// for the listener at path lp: the listener itself in the flat form.
func (l *Listener) SitePath(lp string, j int) string {
	if len(l.Sites) == 0 {
		return lp
	}
	return fmt.Sprintf("%s.sites[%d]", lp, j)
}

// ServesHTTP2 reports whether the listener offers HTTP/2.
func (l *Listener) ServesHTTP2() bool {
	return l.Protocol != ProtocolHTTP && l.Protocol != ProtocolTCP && l.HTTP2 != nil && *l.HTTP2
}

// ProxyProtocol accepts PROXY protocol v1/v2 headers from trusted load
// balancers. A header from any other peer is refused.
type ProxyProtocol struct {
	// Trusted are the IP addresses or CIDR ranges allowed to send a
	// header.
	Trusted []string `yaml:"trusted"`
	// Required refuses connections from trusted peers that send no
	// header.
	Required bool `yaml:"required"`
}

// TLCP is a listener's TLCP identity and policy.
type TLCP struct {
	SignCert string `yaml:"sign_cert"`
	SignKey  string `yaml:"sign_key"`
	EncCert  string `yaml:"enc_cert"`
	EncKey   string `yaml:"enc_key"`
	// Suites are the enabled cipher suites in preference order.
	Suites []string `yaml:"suites"`
	// SuitesDefaulted is set when Suites came from the defaults rather
	// than the file: the proxy may then drop the ECDHE suites for an
	// encryption key that cannot do SM2 key agreement, where it refuses
	// an explicit list.
	SuitesDefaulted bool `yaml:"-"`
	// ClientAuth is none, request, require, verify_if_given or
	// require_and_verify.
	ClientAuth string `yaml:"client_auth"`
	// ClientCA is a PEM file of CAs that verify client certificates.
	ClientCA string `yaml:"client_ca"`
	// AcceptServerAuthClientCerts also accepts client certificates whose
	// extended key usage allows serverAuth but not clientAuth, as some GM
	// CAs issue them.
	AcceptServerAuthClientCerts bool `yaml:"accept_server_auth_client_certs"`
	// ClientRevocation checks verified client certificates against
	// CRLs and OCSP responders (none when nil).
	ClientRevocation *Revocation `yaml:"client_revocation"`
	// SessionCache bounds the sessions kept for resumption.
	SessionCache *SessionCache `yaml:"session_cache"`
	// TLS13ShangMi says whether the site answers TLS 1.3 ClientHellos
	// that offer the ShangMi suites of RFC 8998 with its signing pair on
	// an auto listener: prefer, accept or off (TLS13ShangMi* below).
	TLS13ShangMi string `yaml:"tls13_shangmi"`
	// TLS13Groups are the key exchange groups of TLS 1.3 ShangMi
	// handshakes in preference order: curveSM2MLKEM768, curveSM2.
	TLS13Groups []string `yaml:"tls13_groups"`
	// OCSPStapling sends TLCP clients that ask (status_request) the OCSP
	// response about the signing certificate, when it names an OCSP
	// responder; on when nil.
	OCSPStapling *bool `yaml:"ocsp_stapling"`
}

// Values of tlcp.tls13_shangmi.
const (
	// TLS13ShangMiPrefer serves every hello that offers the ShangMi
	// suites over TLS 1.3 ShangMi, even one that offers the standard
	// TLS 1.3 suites too.
	TLS13ShangMiPrefer = "prefer"
	// TLS13ShangMiAccept serves only hellos that offer no standard TLS
	// 1.3 suite over TLS 1.3 ShangMi; the others go to the tls section.
	TLS13ShangMiAccept = "accept"
	// TLS13ShangMiOff leaves every TLS hello to the tls section.
	TLS13ShangMiOff = "off"
)

// TLS13ShangMiModes are the values of tlcp.tls13_shangmi.
var TLS13ShangMiModes = []string{TLS13ShangMiPrefer, TLS13ShangMiAccept, TLS13ShangMiOff}

// Revocation values of ocsp.
const (
	// RevocationOCSPOff asks no OCSP responder.
	RevocationOCSPOff = "off"
	// RevocationOCSPAIA asks the responder each certificate names in
	// its authorityInfoAccess extension.
	RevocationOCSPAIA = "aia"
	// RevocationFailClosed refuses a certificate whose status is
	// unknown; RevocationFailOpen admits it.
	RevocationFailClosed = "fail_closed"
	RevocationFailOpen   = "fail_open"
)

// RevocationURL reports whether a CRL source or responder is written as
// a URL (it has a scheme) rather than a file path.
func RevocationURL(s string) bool { return strings.Contains(s, "://") }

// OCSPResponder is the responder URL of ocsp, or "" for off and aia.
func (r *Revocation) OCSPResponder() string {
	if r == nil || r.OCSP == RevocationOCSPOff || r.OCSP == RevocationOCSPAIA {
		return ""
	}
	return r.OCSP
}

// Revocation is how certificates verified against a CA are checked for
// revocation: a client's certificate on a site (client_revocation), an
// upstream target's on a https://, tlcp:// or tls13sm:// pool (revocation).
type Revocation struct {
	// CRL are CRL files (PEM or DER) and http(s) URLs, each holding the
	// complete CRL of one CA.
	CRL []string `yaml:"crl"`
	// OCSP is off, aia (the responder each certificate names) or the
	// http(s) URL of a responder asked for every certificate.
	OCSP string `yaml:"ocsp"`
	// Refresh is how often the CRLs are read again (also at each CRL's
	// nextUpdate and on every reload).
	Refresh Duration `yaml:"refresh"`
	// Grace is how long after its nextUpdate the last good CRL or OCSP
	// answer is still used while its source cannot be read; 0s for no
	// grace.
	Grace *Duration `yaml:"grace"`
	// Policy is fail_closed (refuse a certificate whose status nothing
	// current can tell) or fail_open (admit it). A revoked certificate
	// is refused either way.
	Policy string `yaml:"policy"`
}

// Staples reports whether OCSP responses are stapled to the signing
// certificate.
func (t *TLCP) Staples() bool { return t.OCSPStapling == nil || *t.OCSPStapling }

// SessionCache is a listener's TLCP session cache.
type SessionCache struct {
	// Size is how many sessions are kept; 0 turns resumption off.
	Size *int `yaml:"size"`
	// Lifetime is how long a session may be resumed.
	Lifetime Duration `yaml:"lifetime"`
}

// TLS is a listener's TLS identity (RSA or ECDSA) and policy. The
// certificate comes from files (Cert, Key) or from an ACME CA (ACME).
// SM2 adds an SM2 identity for TLS 1.3 with the ShangMi suites; with it,
// Cert and Key may be left out (a site for ShangMi clients alone).
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ACME obtains and renews the certificate instead of Cert and Key.
	ACME *ACME `yaml:"acme"`
	// SM2 is the identity that answers TLS 1.3 ClientHellos offering the
	// ShangMi suites of RFC 8998, under this section's client_auth and
	// client_revocation.
	SM2 *TLSSM2 `yaml:"sm2"`
	// MinVersion is "1.2" or "1.3".
	MinVersion string `yaml:"min_version"`
	ClientAuth string `yaml:"client_auth"`
	ClientCA   string `yaml:"client_ca"`
	// ClientRevocation is as for TLCP.
	ClientRevocation *Revocation `yaml:"client_revocation"`
	// OCSPStapling staples OCSP responses to the certificate (file or
	// ACME) when it names an OCSP responder; on when nil.
	OCSPStapling *bool `yaml:"ocsp_stapling"`
}

// Staples reports whether OCSP responses are stapled to the certificate.
func (t *TLS) Staples() bool { return t.OCSPStapling == nil || *t.OCSPStapling }

// HasStandard reports whether the section has a certificate for
// crypto/tls: files or ACME. A section with an SM2 identity alone has
// none.
func (t *TLS) HasStandard() bool {
	return t != nil && (t.ACME != nil || t.Cert != "" || t.Key != "" || t.SM2 == nil)
}

// TLSSM2 is a site's SM2 identity for TLS 1.3 with the ShangMi suites
// (RFC 8998): an SM2 certificate (with digitalSignature) and its key, on
// a tls listener, or on an auto listener instead of the tlcp signing
// pair.
type TLSSM2 struct {
	// Cert is a PEM file: the SM2 certificate, then its intermediates.
	Cert string `yaml:"cert"`
	// Key is its key reference (a path, file:..., sdf:...).
	Key string `yaml:"key"`
	// ClientCA is a PEM file of the SM2 CAs that verify the client
	// certificates of TLS 1.3 ShangMi clients (the tls section's
	// client_ca verifies those of crypto/tls).
	ClientCA string `yaml:"client_ca"`
	// TLS13ShangMi and TLS13Groups are as in TLCP: prefer, accept or
	// off, and the groups in preference order.
	TLS13ShangMi string   `yaml:"tls13_shangmi"`
	TLS13Groups  []string `yaml:"tls13_groups"`
}

// Serves reports whether the identity answers TLS 1.3 ShangMi clients
// (tls13_shangmi is not off).
func (t *TLSSM2) Serves() bool { return t != nil && t.TLS13ShangMi != TLS13ShangMiOff }

// ACME challenge types.
const (
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
)

// ACME is the ACME account and the names a TLS certificate is obtained
// for. Certificates, keys and the account live under StateDir/acme.
type ACME struct {
	// Domains are the names the certificate is for.
	Domains []string `yaml:"domains"`
	// Email is the account's contact for expiry notices (optional).
	Email string `yaml:"email"`
	// CA is the ACME directory URL; Let's Encrypt's production directory
	// by default.
	CA string `yaml:"ca"`
	// CARoot is a PEM file of CAs that verify the ACME server's own HTTPS
	// certificate, for a private ACME CA; the system roots by default.
	CARoot string `yaml:"ca_root"`
	// Challenges are the challenge types allowed: http-01 (answered by an
	// http listener) and tls-alpn-01 (answered on this listener's port).
	// By default tls-alpn-01, and http-01 when there is an http listener.
	Challenges []string `yaml:"challenges"`
	// KeyType of the certificate's key: p256, p384, rsa2048 or rsa4096.
	KeyType string `yaml:"key_type"`
	// Shared keeps the account, certificates and locks in the session
	// store instead of StateDir/acme, so that one replica obtains a
	// certificate and the others load it.
	Shared bool `yaml:"shared,omitempty"`
}

// Route sends requests for a host and path prefix to an upstream. Routes
// to tcp:// upstreams match on the SNI host only and take the whole
// connection, as do all the routes of a tcp listener (which match no host).
type Route struct {
	// Host is a host name, a wildcard "*.example.cn", or empty for any.
	Host string `yaml:"host"`
	// Path is a path prefix ("/api/"); empty or "/" for all.
	Path     string `yaml:"path"`
	Upstream string `yaml:"upstream"`
}

// SessionHeaders are the names of headers describing the client's session.
type SessionHeaders struct {
	Protocol string `yaml:"protocol"`
	Suite    string `yaml:"suite"`
	Resumed  string `yaml:"resumed"`
	// ClientSubject, ClientSerial and ClientFingerprint describe the
	// client's signing certificate; they are sent only when its chain was
	// verified.
	ClientSubject     string `yaml:"client_subject"`
	ClientSerial      string `yaml:"client_serial"`
	ClientFingerprint string `yaml:"client_fingerprint"`
	// ClientVerified says whether the client presented a certificate that
	// was verified (true or false).
	ClientVerified string `yaml:"client_verified"`
	// ClientIssuer and ClientSANs describe the verified signing
	// certificate further: its issuer's name, and its subject
	// alternative names.
	ClientIssuer string `yaml:"client_issuer"`
	ClientSANs   string `yaml:"client_sans"`
	// ClientCert and ClientCertChain carry the verified signing
	// certificate and the rest of its verified chain as RFC 9440 byte
	// sequences of DER (Client-Cert, Client-Cert-Chain); ClientEncCert
	// carries a TLCP client's encryption certificate the same way.
	ClientCert      string `yaml:"client_cert"`
	ClientCertChain string `yaml:"client_cert_chain"`
	ClientEncCert   string `yaml:"client_enc_cert"`
	// ClientCertMaxBytes bounds the value of each of the three
	// certificate headers; a certificate that does not fit is left out
	// (DefaultClientCertMaxBytes when zero).
	ClientCertMaxBytes int `yaml:"client_cert_max_bytes"`
}

// HasClientIdentity reports whether any header names the client's
// certificate.
func (h SessionHeaders) HasClientIdentity() bool {
	return h.ClientSubject != "" || h.ClientSerial != "" || h.ClientFingerprint != "" ||
		h.ClientIssuer != "" || h.ClientSANs != "" || h.HasClientCerts()
}

// HasClientCerts reports whether any header carries a whole certificate.
func (h SessionHeaders) HasClientCerts() bool {
	return h.ClientCert != "" || h.ClientCertChain != "" || h.ClientEncCert != ""
}

// Upstream selection policies.
const (
	PolicyRoundRobin = "round_robin"
	PolicyLeastConn  = "least_conn"
)

// UpstreamHostTarget is the value of an upstream's host that sends each
// target its own host name.
const UpstreamHostTarget = "target"

// Upstream is a pool of targets of one kind (all http://, all https://,
// all h2c://, all tlcp:// or all tcp://).
type Upstream struct {
	// Targets are scheme://host:port: http (HTTP/1.1), https and tlcp
	// (HTTP/1.1, or HTTP/2 with HTTP2; tlcp also carries TCP routes), h2c
	// (HTTP/2 without TLS, for gRPC) or tcp.
	Targets []string `yaml:"targets"`
	// HTTP2 offers HTTP/2 to https:// and tlcp:// targets (ALPN h2,
	// HTTP/1.1 when a target does not take it). Off by default, for
	// tlcp:// because GmSSL 3.1 servers refuse the ALPN extension. h2c://
	// targets always speak HTTP/2.
	HTTP2 bool `yaml:"http2"`
	// Host is the Host header (HTTP/2: :authority) of the requests sent
	// to the targets: empty passes the client's on, UpstreamHostTarget
	// sends each target's host[:port] as written in Targets (without
	// the scheme's default port), anything else is sent as written
	// (host[:port]). X-Forwarded-Host keeps the client's.
	Host string `yaml:"host"`
	// Policy is round_robin or least_conn.
	Policy string       `yaml:"policy"`
	TLS    *UpstreamTLS `yaml:"tls"`
	// TLCP configures the client side of tlcp:// targets.
	TLCP *UpstreamTLCP `yaml:"tlcp"`
	// TLS13SM configures the client side of tls13sm:// targets.
	TLS13SM *UpstreamTLS13SM `yaml:"tls13sm"`
	Health  Health           `yaml:"health"`
	// Passive health: targets that fail MaxFails times in a row are left
	// out for EjectFor.
	Passive Passive `yaml:"passive"`
	// Retries is how many other targets an idempotent request that could
	// not be sent is tried on; 0 disables retries.
	Retries *int `yaml:"retries"`
	// MaxConnsPerTarget bounds the requests in flight to each target: the
	// connections in use over HTTP/1.1, the streams over HTTP/2. Requests
	// beyond it wait, at most QueueSize of them for at most QueueTimeout.
	// Not for tcp:// targets, whose connections max_connections bounds.
	MaxConnsPerTarget *int `yaml:"max_conns_per_target"`
	// QueueSize is how many requests may wait for a target's slot; 0
	// answers 503 at once when all are taken.
	QueueSize *int `yaml:"queue_size"`
	// QueueTimeout is how long a request waits for a slot before it is
	// answered 503.
	QueueTimeout Duration `yaml:"queue_timeout"`

	// path is the upstream's field path (see Path).
	path string
}

// UpstreamTLS configures https:// targets.
type UpstreamTLS struct {
	// CA is a PEM file of CAs for the targets' certificates; the system
	// pool when empty.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate, when the target asks for
	// one.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name checked in the targets' certificates (and
	// sent as SNI); the target's host when empty.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables verification of the targets'
	// certificates. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// Revocation checks the targets' certificates for revocation (off
	// when nil).
	Revocation *Revocation `yaml:"revocation"`
}

// UpstreamTLCP configures tlcp:// targets: gmgate as a TLCP client,
// carrying HTTP requests (from http, tls, tlcp and auto listeners) or
// whole connections (from tcp listeners).
type UpstreamTLCP struct {
	// CA is a PEM file of the CAs that issue the targets' signing and
	// encryption certificates; the system pool when empty.
	CA string `yaml:"ca"`
	// ServerName is the name checked in the targets' signing
	// certificates; the target's host when empty.
	ServerName string `yaml:"server_name"`
	// SendServerName sends the server name as an SNI extension, for
	// targets that serve several sites on one port. Off by default: some
	// TLCP servers (GmSSL 3.1) refuse any ClientHello extension.
	SendServerName bool `yaml:"send_server_name"`
	// SignCert and SignKey are the client's signing certificate and key,
	// for targets that ask for a client certificate; EncCert and EncKey
	// its encryption pair, needed for the ECDHE suites. Keys are key
	// references (a path, file:..., sdf:...).
	SignCert string `yaml:"sign_cert"`
	SignKey  string `yaml:"sign_key"`
	EncCert  string `yaml:"enc_cert"`
	EncKey   string `yaml:"enc_key"`
	// Suites are the cipher suites offered, in preference order.
	Suites []string `yaml:"suites"`
	// SuitesDefaulted is set when Suites came from the defaults: the
	// ECDHE suites are then left out when the client has no encryption
	// key that can do SM2 key agreement, where an explicit list is
	// refused.
	SuitesDefaulted bool `yaml:"-"`
	// Profile is the client's wire profile: standard (Tongsuo, gotlcp,
	// gmgate and most peers), gmssl (GmSSL 3 servers that ask for a
	// client certificate) or auto (UpstreamProfileAuto).
	Profile string `yaml:"profile"`
	// InsecureSkipVerify accepts any server certificate. For tests only;
	// logged as a warning at every start and reload.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// SessionCache bounds the sessions kept to resume with the targets
	// (one per target is used); size 0 turns resumption off.
	SessionCache *SessionCache `yaml:"session_cache"`
	// Revocation checks the targets' signing and encryption
	// certificates for revocation (off when nil).
	Revocation *Revocation `yaml:"revocation"`
}

// HasIdentity reports whether a client certificate is configured.
func (t *UpstreamTLCP) HasIdentity() bool {
	return t != nil && (t.SignCert != "" || t.SignKey != "" || t.EncCert != "" || t.EncKey != "")
}

// HasEncPair reports whether a client encryption pair is configured.
func (t *UpstreamTLCP) HasEncPair() bool {
	return t != nil && (t.EncCert != "" || t.EncKey != "")
}

// Health is the active health check of each target: an HTTP GET of Path
// (http, https and tlcp pools with a path) or a connect (with the TLCP
// handshake for tlcp pools).
type Health struct {
	// Path is the HTTP path to check; empty means a TCP connect check.
	Path     string   `yaml:"path"`
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
	// Fails is how many failed checks in a row mark a target down.
	Fails int `yaml:"fails"`
	// Passes is how many good checks in a row mark it up again.
	Passes int `yaml:"passes"`
	// Disabled turns active checks off.
	Disabled bool `yaml:"disabled"`
}

// Passive is failure counting on real traffic.
type Passive struct {
	// MaxFails failures in a row (connection errors, timeouts) eject a
	// target; 0 disables passive ejection.
	MaxFails *int `yaml:"max_fails"`
	// EjectFor is how long an ejected target is left out.
	EjectFor Duration `yaml:"eject_for"`
	// PanicThreshold is a percentage: when fewer than this share of the
	// targets are in service, ejections are ignored and requests go to
	// every target the active checks hold healthy. 0 turns it off.
	PanicThreshold *int `yaml:"panic_threshold"`
}

// Duration is a time.Duration written as "5s", "250ms", "1m30s".
type Duration time.Duration

// durationType names Duration in decoding problems.
const durationType = "duration"

// durationFix is how to write a duration.
const durationFix = `write it as "5s", "250ms" or "1m30s"`

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a duration string. A bad value is reported as a type
// error so that decoding goes on and every problem is reported.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		// In yaml.v3's own words, so that the problem is placed at the
		// value's field rather than at a key inside it.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into %s", n.Line, n.ShortTag(), durationType)}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration; %s", n.Line, n.Value, durationFix)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

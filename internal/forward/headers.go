package forward

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gmgate/gmgate/config"
)

// forwardingHeaders are the request headers gmgate sets on every request
// it forwards, besides the listener's session headers.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP"}

// certHeaders are the headers of RFC 9440 with which a TLS-terminating
// proxy hands the client's certificate to its upstream: gmgate does not
// set them, but an upstream may read them as an identity that gmgate
// vouched for, so no client may send them through.
var certHeaders = []string{"Client-Cert", "Client-Cert-Chain"}

// identityHeaderNames are the names of every header gmgate can set on a
// request to tell its upstream who the client is or how it connected:
// the session headers of every listener and site of cfg, and
// certHeaders. Each listener removes all of them from its clients'
// requests, whether or not it sets them itself: an upstream that another
// listener (or site) sends a verified identity under a name cannot tell
// that identity from one a client of this listener wrote.
func IdentityHeaderNames(cfg *config.Config) []string {
	names := slices.Clone(certHeaders)
	add := func(h config.SessionHeaders) {
		// Every session header, including any added to the type later.
		v := reflect.ValueOf(h)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
				names = append(names, f.String())
			}
		}
	}
	for _, l := range cfg.Listeners {
		add(l.SessionHeaders)
		for _, sc := range l.Sites {
			if sc.SessionHeaders != nil {
				add(*sc.SessionHeaders)
			}
		}
	}
	return names
}

// spoofableHeaders returns the normalised names (see normalHeaderName) of
// every header gmgate sets on requests anywhere: the forwarding headers
// and identity (identityHeaderNames). A client's header that normalises to
// one of them is a forgery attempt. CGI, WSGI and PHP backends map
// X_Forwarded_For and X-Forwarded-For to the same variable, so removing
// the exact names alone would not do.
func spoofableHeaders(identity []string) []string {
	names := make([]string, 0, len(forwardingHeaders)+len(identity))
	for _, n := range slices.Concat(forwardingHeaders, identity) {
		if n := NormalHeaderName(n); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// removeSpoofable deletes the headers of h whose names normalise to one
// of names.
func RemoveSpoofable(h http.Header, names []string) {
	for key := range h {
		for _, n := range names {
			if sameHeaderName(key, n) {
				delete(h, key)
				break
			}
		}
	}
}

// normalHeaderName is a header name as a CGI-style backend sees it:
// case and the difference between '_' and '-' do not count.
func NormalHeaderName(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = normalHeaderByte(c)
	}
	return string(b)
}

// sameHeaderName reports whether key normalises to normal, without
// allocating.
func sameHeaderName(key, normal string) bool {
	if len(key) != len(normal) {
		return false
	}
	for i := 0; i < len(key); i++ {
		if normalHeaderByte(key[i]) != normal[i] {
			return false
		}
	}
	return true
}

func normalHeaderByte(c byte) byte {
	switch {
	case c >= 'A' && c <= 'Z':
		return c + 'a' - 'A'
	case c == '_':
		return '-'
	}
	return c
}

// Canonical names of the forwarding headers, as http.Header keys them.
var (
	KeyForwarded       = http.CanonicalHeaderKey("Forwarded")
	KeyXForwardedFor   = http.CanonicalHeaderKey("X-Forwarded-For")
	KeyXForwardedHost  = http.CanonicalHeaderKey("X-Forwarded-Host")
	KeyXForwardedProto = http.CanonicalHeaderKey("X-Forwarded-Proto")
	keyXRealIP         = http.CanonicalHeaderKey("X-Real-IP")
)

// headerPolicy is what a site does to the headers of the requests it
// forwards, with the names looked up once: the look-alikes of the headers
// gmgate sets are removed, then the forwarding headers and the site's
// session headers are set.
type HeaderPolicy struct {
	// spoofable are the normalised names of every header gmgate sets, on
	// any listener.
	Spoofable []string
	// session are the canonical names of the session headers in the order
	// of connHeaders.session ("" for one not configured).
	session [sessionHeaderCount]string
	// certMaxBytes bounds the value of each certificate header.
	certMaxBytes int
}

// The session headers, in the order they are applied.
const (
	sessionProtocol = iota
	sessionSuite
	sessionResumed
	sessionClientVerified
	sessionClientSubject
	sessionClientSerial
	sessionClientFingerprint
	sessionClientIssuer
	sessionClientSANs
	sessionClientCert
	sessionClientCertChain
	sessionClientEncCert
	sessionHeaderCount
)

// newHeaderPolicy is the policy of a site that sets the session headers
// h, and removes every header of identity (identityHeaderNames) that clients
// send.
func NewHeaderPolicy(h config.SessionHeaders, identity []string) *HeaderPolicy {
	p := &HeaderPolicy{Spoofable: spoofableHeaders(identity), certMaxBytes: h.ClientCertMaxBytes}
	if p.certMaxBytes <= 0 {
		p.certMaxBytes = config.DefaultClientCertMaxBytes
	}
	for i, name := range [sessionHeaderCount]string{
		sessionProtocol:          h.Protocol,
		sessionSuite:             h.Suite,
		sessionResumed:           h.Resumed,
		sessionClientVerified:    h.ClientVerified,
		sessionClientSubject:     h.ClientSubject,
		sessionClientSerial:      h.ClientSerial,
		sessionClientFingerprint: h.ClientFingerprint,
		sessionClientIssuer:      h.ClientIssuer,
		sessionClientSANs:        h.ClientSANs,
		sessionClientCert:        h.ClientCert,
		sessionClientCertChain:   h.ClientCertChain,
		sessionClientEncCert:     h.ClientEncCert,
	} {
		if name != "" {
			p.session[i] = http.CanonicalHeaderKey(name)
		}
	}
	return p
}

// apply sets the forwarding headers of the request in on its outbound
// headers out, and the session headers the site sends: whatever the
// client sent under these names is gone first, so that they cannot be
// forged. The values are those the connection's first request made.
func (p *HeaderPolicy) Apply(out http.Header, in *http.Request, ci *ConnInfo) {
	ch := ci.forwarding(in.RemoteAddr, p)
	if ch.xForwardedFor != nil {
		out[KeyXForwardedFor] = ch.xForwardedFor
	} else {
		delete(out, KeyXForwardedFor)
	}
	out[KeyXForwardedHost] = []string{in.Host}
	out[KeyXForwardedProto] = ch.proto
	out[KeyForwarded] = ch.forwarded(in.Host)
	out[keyXRealIP] = ch.realIP
	for i, name := range p.session {
		if name == "" {
			continue
		}
		delete(out, name)
		if v := ch.session[i]; v != nil {
			out[name] = v
		}
	}
}

// connHeaders are the values of the forwarding and session headers that
// stay the same for all the requests of a connection. Each is a slice of
// one value, shared by the requests' headers, which only read them.
type connHeaders struct {
	remoteAddr    string
	xForwardedFor []string // nil when the address has no port
	realIP        []string
	proto         []string
	// forwardedFor is the for= parameter of Forwarded.
	forwardedFor string
	// session are the values of the session headers (nil: not sent).
	session [sessionHeaderCount][]string
	// lastForwarded is the Forwarded header of the last Host seen.
	lastForwarded atomic.Pointer[forwardedHeader]
}

type forwardedHeader struct {
	host  string
	value []string
}

// forwarding returns the connection's header values for requests from
// remoteAddr (which net/http sets to the connection's address) under
// the policy p of the connection's site.
func (ci *ConnInfo) forwarding(remoteAddr string, p *HeaderPolicy) *connHeaders {
	if ch := ci.headers.Load(); ch != nil && ch.remoteAddr == remoteAddr {
		return ch
	}
	ch := newConnHeaders(ci, remoteAddr, p)
	ci.headers.Store(ch)
	return ch
}

func newConnHeaders(ci *ConnInfo, remoteAddr string, p *HeaderPolicy) *connHeaders {
	one := func(v string) []string {
		if v == "" {
			return nil
		}
		return []string{v}
	}
	proto := "https"
	if ci.Protocol == "http" {
		proto = "http"
	}
	clientIP := remoteAddr
	xForwardedFor := false
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		clientIP, xForwardedFor = host, true
	}
	ch := &connHeaders{remoteAddr: remoteAddr, realIP: []string{clientIP}, proto: []string{proto}}
	if xForwardedFor {
		ch.xForwardedFor = []string{clientIP}
	}
	ch.forwardedFor = clientIP
	if strings.Contains(clientIP, ":") {
		ch.forwardedFor = `"[` + clientIP + `]"`
	}
	ch.session[sessionProtocol] = one(ci.Protocol)
	ch.session[sessionSuite] = one(ci.Suite)
	if ci.Protocol != "unknown" {
		ch.session[sessionResumed] = one(strconv.FormatBool(ci.Resumed))
		ch.session[sessionClientVerified] = one(strconv.FormatBool(ci.clientVerified))
	}
	if ci.peerCert != nil {
		ch.session[sessionClientSubject] = one(ci.peerCert.Subject.String())
		ch.session[sessionClientSerial] = one(strings.ToUpper(ci.peerCert.SerialNumber.Text(16)))
		sum := sha256.Sum256(ci.peerCertDER)
		ch.session[sessionClientFingerprint] = one(hex.EncodeToString(sum[:]))
		// The rest is made only for a site that sends it: a chain's
		// base64 is kilobytes.
		if p.session[sessionClientIssuer] != "" {
			ch.session[sessionClientIssuer] = one(ci.peerCert.Issuer.String())
		}
		if p.session[sessionClientSANs] != "" {
			ch.session[sessionClientSANs] = one(sanList(ci.peerCert))
		}
		if p.session[sessionClientCert] != "" {
			ch.session[sessionClientCert] = one(byteSequences([][]byte{ci.peerCertDER}, p.certMaxBytes))
		}
		if p.session[sessionClientCertChain] != "" {
			ch.session[sessionClientCertChain] = one(byteSequences(ci.peerChain, p.certMaxBytes))
		}
		if p.session[sessionClientEncCert] != "" && ci.peerEncDER != nil {
			ch.session[sessionClientEncCert] = one(byteSequences([][]byte{ci.peerEncDER}, p.certMaxBytes))
		}
	}
	return ch
}

// forwarded is the Forwarded header of a request for host.
func (ch *connHeaders) forwarded(host string) []string {
	if f := ch.lastForwarded.Load(); f != nil && f.host == host {
		return f.value
	}
	f := &forwardedHeader{host: host, value: []string{"for=" + ch.forwardedFor + ";host=" + quoteIfNeeded(host) + ";proto=" + ch.proto[0]}}
	ch.lastForwarded.Store(f)
	return f.value
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, ":;,= \"[]") {
		return strconv.Quote(s)
	}
	return s
}

// hopByHop are the hop-by-hop headers ReverseProxy removes besides those
// named in Connection.
var HopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

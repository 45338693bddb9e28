package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/gmgate/gmgate/tlcp"
)

// Validate checks a configuration built in code (Parse validates what it
// reads). Defaults must have been applied. All problems are reported in
// one *Error.
func (c *Config) Validate() error {
	probs := validate(c, nil)
	if len(probs) == 0 {
		return nil
	}
	sortProblems(probs)
	return &Error{Problems: probs}
}

type validator struct {
	idx   *nodeIndex
	file  string
	probs []Problem
}

func (v *validator) add(path, msg, fix string) {
	v.probs = append(v.probs, Problem{File: v.file, Line: v.idx.line(path), Path: path, Msg: msg, Fix: fix})
}

func validate(c *Config, idx *nodeIndex) []Problem {
	v := &validator{idx: idx, file: c.File}
	if c.Admin.Listen != "off" {
		v.hostPort("admin.listen", c.Admin.Listen, `or "off" to run without the admin listener`)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", fmt.Sprintf("unknown level %q", c.Log.Level), "use debug, info, warn or error")
	}
	v.positive("limits.max_connections", c.Limits.MaxConnections)
	v.positive("limits.max_handshakes", c.Limits.MaxHandshakes)
	v.positive("limits.max_header_bytes", c.Limits.MaxHeaderBytes)
	for _, d := range []struct {
		path string
		d    Duration
	}{
		{"limits.handshake_wait", c.Limits.HandshakeWait},
		{"timeouts.handshake", c.Timeouts.Handshake},
		{"timeouts.read_header", c.Timeouts.ReadHeader},
		{"timeouts.idle", c.Timeouts.Idle},
		{"timeouts.upstream_connect", c.Timeouts.UpstreamConnect},
		{"timeouts.upstream_response", c.Timeouts.UpstreamResponse},
		{"timeouts.shutdown", c.Timeouts.Shutdown},
	} {
		if d.d < 0 {
			v.add(d.path, "a duration may not be negative", "write a positive duration such as \"5s\"")
		}
	}

	if len(c.Listeners) == 0 {
		v.add("listeners", "no listener is configured", "add at least one entry under listeners: with listen, protocol and routes")
	}
	names := map[string]int{}
	addrs := map[string]int{}
	for i := range c.Listeners {
		v.listener(c, i, names, addrs)
	}
	upNames := make([]string, 0, len(c.Upstreams))
	for name := range c.Upstreams {
		upNames = append(upNames, name)
	}
	sort.Strings(upNames)
	for _, name := range upNames {
		v.upstream("upstreams."+name, c.Upstreams[name])
	}
	return v.probs
}

func (v *validator) positive(path string, n int) {
	if n <= 0 {
		v.add(path, fmt.Sprintf("must be greater than zero, not %d", n), "remove it to use the default")
	}
}

func (v *validator) hostPort(path, s, alt string) bool {
	fix := `write host:port, such as "127.0.0.1:9180" or ":443"`
	if alt != "" {
		fix += " " + alt
	}
	if s == "" {
		v.add(path, "no address given", fix)
		return false
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		v.add(path, fmt.Sprintf("%q is not host:port", s), fix)
		return false
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		v.add(path, fmt.Sprintf("%q has no valid port", s), fix)
		return false
	}
	return true
}

func (v *validator) listener(c *Config, i int, names, addrs map[string]int) {
	l := &c.Listeners[i]
	p := fmt.Sprintf("listeners[%d]", i)
	if j, dup := names[l.Name]; dup {
		v.add(p+".name", fmt.Sprintf("name %q is already used by listeners[%d]", l.Name, j), "give each listener its own name")
	} else {
		names[l.Name] = i
	}
	if v.hostPort(p+".listen", l.Listen, "") {
		if j, dup := addrs[l.Listen]; dup && !strings.HasSuffix(l.Listen, ":0") {
			v.add(p+".listen", fmt.Sprintf("address %q is already used by listeners[%d]", l.Listen, j), "give each listener its own port")
		} else {
			addrs[l.Listen] = i
		}
	}
	switch l.Protocol {
	case ProtocolTLCP:
		v.needTLCP(p, l)
		if l.TLS != nil {
			v.add(p+".tls", "a tlcp listener does not use a tls section", "set protocol: auto to serve TLS clients on this port too, or remove the tls section")
		}
	case ProtocolTLS:
		if l.TLS == nil {
			v.add(p+".tls", "a tls listener needs a tls section", "add tls: with cert and key")
		}
		if l.TLCP != nil {
			v.add(p+".tlcp", "a tls listener does not use a tlcp section", "set protocol: auto to serve TLCP clients on this port too, or remove the tlcp section")
		}
	case ProtocolAuto:
		v.needTLCP(p, l)
		if l.TLS == nil {
			v.add(p+".tls", "an auto listener needs a tls section for its TLS clients", "add tls: with cert and key, or set protocol: tlcp")
		}
	default:
		v.add(p+".protocol", fmt.Sprintf("unknown protocol %q", l.Protocol), "use tlcp, tls or auto")
	}
	if l.TLCP != nil {
		v.tlcp(p+".tlcp", l.TLCP)
	}
	if l.TLS != nil {
		v.tls(p+".tls", l.TLS)
	}
	if pp := l.ProxyProtocol; pp != nil {
		if len(pp.Trusted) == 0 {
			v.add(p+".proxy_protocol.trusted", "no trusted address given", "list the load balancers' addresses or CIDR ranges, such as 10.0.0.0/8")
		}
		for j, t := range pp.Trusted {
			if _, err := netip.ParsePrefix(t); err == nil {
				continue
			}
			if _, err := netip.ParseAddr(t); err == nil {
				continue
			}
			v.add(fmt.Sprintf("%s.proxy_protocol.trusted[%d]", p, j), fmt.Sprintf("%q is not an IP address or CIDR range", t), "write an address such as 10.0.0.5 or a range such as 10.0.0.0/8")
		}
	}
	for _, h := range []struct{ field, name string }{
		{"protocol", l.SessionHeaders.Protocol},
		{"suite", l.SessionHeaders.Suite},
		{"resumed", l.SessionHeaders.Resumed},
		{"client_subject", l.SessionHeaders.ClientSubject},
		{"client_serial", l.SessionHeaders.ClientSerial},
		{"client_fingerprint", l.SessionHeaders.ClientFingerprint},
		{"client_verified", l.SessionHeaders.ClientVerified},
	} {
		if h.name != "" && !validHeaderName(h.name) {
			v.add(p+".session_headers."+h.field, fmt.Sprintf("%q is not a valid header name", h.name), "use letters, digits and '-', such as X-TLCP-Suite")
		}
	}
	if len(l.Routes) == 0 {
		v.add(p+".routes", "the listener has no route", "add routes: with at least one upstream")
	}
	seen := map[string]int{}
	for j, r := range l.Routes {
		rp := fmt.Sprintf("%s.routes[%d]", p, j)
		if r.Host != "" && !validHost(r.Host) {
			v.add(rp+".host", fmt.Sprintf("%q is not a host name", r.Host), "write a name such as api.example.cn or *.example.cn, or leave it out to match any host")
		}
		if !strings.HasPrefix(r.Path, "/") {
			v.add(rp+".path", fmt.Sprintf("%q does not start with /", r.Path), "write a path prefix such as /api/")
		}
		key := strings.ToLower(r.Host) + " " + r.Path
		if k, dup := seen[key]; dup {
			v.add(rp, fmt.Sprintf("the same host and path as routes[%d], so it is never used", k), "remove one of them")
		} else {
			seen[key] = j
		}
		if r.Upstream == "" {
			v.add(rp+".upstream", "no upstream named", "name one of the pools under upstreams:")
			continue
		}
		u, ok := c.Upstreams[r.Upstream]
		if !ok || u == nil {
			v.add(rp+".upstream", fmt.Sprintf("no upstream is called %q", r.Upstream), "name one of the pools under upstreams: ("+strings.Join(upstreamNames(c), ", ")+")")
			continue
		}
		if u.Scheme() == "tcp" && r.Path != "/" {
			v.add(rp+".path", "routes to tcp:// upstreams take whole connections and cannot match a path", "remove path, or use an http:// upstream")
		}
	}
}

func upstreamNames(c *Config) []string {
	var out []string
	for n := range c.Upstreams {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (v *validator) needTLCP(p string, l *Listener) {
	if l.TLCP == nil {
		v.add(p+".tlcp", "a "+l.Protocol+" listener needs a tlcp section", "add tlcp: with sign_cert, sign_key, enc_cert and enc_key")
	}
}

func (v *validator) tlcp(p string, t *TLCP) {
	v.certFile("sign_cert", p, t.SignCert)
	v.keyRef(p+".sign_key", t.SignKey)
	v.certFile("enc_cert", p, t.EncCert)
	v.keyRef(p+".enc_key", t.EncKey)
	for i, s := range t.Suites {
		if _, ok := tlcp.CipherSuiteByName(s); !ok {
			var names []string
			for _, cs := range tlcp.CipherSuites() {
				names = append(names, cs.Name)
			}
			v.add(fmt.Sprintf("%s.suites[%d]", p, i), fmt.Sprintf("unknown cipher suite %q", s), "use one of "+strings.Join(names, ", "))
		}
	}
	v.clientAuth(p, t.ClientAuth, t.ClientCA)
	if sc := t.SessionCache; sc != nil {
		if sc.Size != nil && (*sc.Size < 0 || *sc.Size > MaxSessionCacheSize) {
			v.add(p+".session_cache.size", fmt.Sprintf("%d is out of range", *sc.Size), fmt.Sprintf("use 0 (no resumption) to %d sessions", MaxSessionCacheSize))
		}
		if sc.Lifetime < 0 || sc.Lifetime.D() > MaxSessionLifetime {
			v.add(p+".session_cache.lifetime", fmt.Sprintf("%s is out of range", sc.Lifetime), "use a duration from 1s to 24h")
		}
	}
}

func (v *validator) tls(p string, t *TLS) {
	v.certFile("cert", p, t.Cert)
	v.keyRef(p+".key", t.Key)
	if t.MinVersion != "1.2" && t.MinVersion != "1.3" {
		v.add(p+".min_version", fmt.Sprintf("unknown TLS version %q", t.MinVersion), `use "1.2" or "1.3"`)
	}
	v.clientAuth(p, t.ClientAuth, t.ClientCA)
}

// ClientAuthModes are the values of client_auth.
var ClientAuthModes = []string{"none", "request", "require", "verify_if_given", "require_and_verify"}

func (v *validator) clientAuth(p, mode, ca string) {
	switch mode {
	case "none", "request", "require":
	case "verify_if_given", "require_and_verify":
		if ca == "" {
			v.add(p+".client_ca", "client_auth: "+mode+" needs the CAs that verify client certificates", "set client_ca to a PEM file of CA certificates")
		}
	default:
		v.add(p+".client_auth", fmt.Sprintf("unknown client_auth %q", mode), "use one of "+strings.Join(ClientAuthModes, ", "))
	}
	if ca != "" {
		v.notInline(p+".client_ca", ca)
	}
}

func (v *validator) certFile(field, p, s string) {
	path := p + "." + field
	if s == "" {
		v.add(path, "no certificate file given", "set it to the path of a PEM certificate file")
		return
	}
	v.notInline(path, s)
}

func (v *validator) notInline(path, s string) bool {
	if strings.Contains(s, "-----BEGIN") {
		v.add(path, "PEM data written inline", "put it in a file and give the file's path")
		return false
	}
	return true
}

// keyRef checks a key reference without opening it: it must name the key,
// never contain it or its password.
func (v *validator) keyRef(path, s string) {
	if s == "" {
		v.add(path, "no key given", "set it to a key file path, file:/path?password-env=VAR, or an sdf: reference")
		return
	}
	if !v.notInline(path, s) {
		return
	}
	_, query, ok := strings.Cut(s, "?")
	if !ok {
		return
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		v.add(path, "the key reference's parameters cannot be read", "write them as name=value pairs joined by &")
		return
	}
	for _, secret := range []string{"password", "pin"} {
		if params.Has(secret) {
			// The value itself is never repeated: it is a secret.
			v.add(path, "the "+secret+" is written in the configuration", "use "+secret+"-env=VAR or "+secret+"-file=PATH so that it stays out of the file")
		}
	}
}

func (v *validator) upstream(p string, u *Upstream) {
	if u == nil {
		v.add(p, "the upstream is empty", "give it targets: [\"http://host:port\"]")
		return
	}
	if len(u.Targets) == 0 {
		v.add(p+".targets", "no targets", `list at least one, such as "http://10.0.0.5:8080"`)
	}
	scheme := ""
	for i, t := range u.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", p, i)
		s, err := ParseTarget(t)
		if err != nil {
			v.add(tp, err.Error(), `write scheme://host:port with scheme http, https or tcp`)
			continue
		}
		if scheme == "" {
			scheme = s.Scheme
		} else if s.Scheme != scheme {
			v.add(tp, fmt.Sprintf("a %s:// target in a pool of %s:// targets", s.Scheme, scheme), "put targets of each kind in their own upstream")
		}
	}
	switch u.Policy {
	case PolicyRoundRobin, PolicyLeastConn:
	default:
		v.add(p+".policy", fmt.Sprintf("unknown policy %q", u.Policy), "use round_robin or least_conn")
	}
	if u.TLS != nil {
		if scheme != "" && scheme != "https" {
			v.add(p+".tls", "tls settings apply to https:// targets only", "remove tls, or use https:// targets")
		}
		if (u.TLS.Cert == "") != (u.TLS.Key == "") {
			v.add(p+".tls", "a client certificate needs both cert and key", "set both or neither")
		}
		if u.TLS.Key != "" {
			v.keyRef(p+".tls.key", u.TLS.Key)
		}
		for _, f := range []struct{ name, val string }{{"ca", u.TLS.CA}, {"cert", u.TLS.Cert}} {
			if f.val != "" {
				v.notInline(p+".tls."+f.name, f.val)
			}
		}
	}
	if u.Health.Path != "" {
		if scheme == "tcp" {
			v.add(p+".health.path", "tcp:// targets are checked by connecting, not by path", "remove path")
		} else if !strings.HasPrefix(u.Health.Path, "/") {
			v.add(p+".health.path", fmt.Sprintf("%q does not start with /", u.Health.Path), "write a path such as /healthz")
		}
	}
	v.positive(p+".health.fails", u.Health.Fails)
	v.positive(p+".health.passes", u.Health.Passes)
	if u.Health.Interval <= 0 {
		v.add(p+".health.interval", "must be greater than zero", `write a duration such as "5s"`)
	}
	if u.Health.Timeout <= 0 {
		v.add(p+".health.timeout", "must be greater than zero", `write a duration such as "2s"`)
	}
	if u.Passive.MaxFails != nil && *u.Passive.MaxFails < 0 {
		v.add(p+".passive.max_fails", "may not be negative", "use 0 to turn passive ejection off")
	}
	if u.Passive.EjectFor <= 0 {
		v.add(p+".passive.eject_for", "must be greater than zero", `write a duration such as "30s"`)
	}
	if u.Retries != nil && (*u.Retries < 0 || *u.Retries > 10) {
		v.add(p+".retries", fmt.Sprintf("%d is out of range", *u.Retries), "use a number from 0 to 10")
	}
}

// Scheme returns the scheme shared by the upstream's targets ("" when it
// has none that parse).
func (u *Upstream) Scheme() string {
	for _, t := range u.Targets {
		if s, err := ParseTarget(t); err == nil {
			return s.Scheme
		}
	}
	return ""
}

// ParseTarget parses an upstream target, scheme://host:port.
func ParseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not scheme://host:port", s)
	}
	switch u.Scheme {
	case "http", "https", "tcp":
	default:
		return nil, fmt.Errorf("unknown scheme %q in %q", u.Scheme, s)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q carries user information; credentials do not belong in the configuration", u.Redacted())
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q has a path or query; targets are scheme://host:port", s)
	}
	if u.Port() == "" {
		if u.Scheme == "tcp" {
			return nil, fmt.Errorf("%q has no port", s)
		}
	}
	return u, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// knownFields lists the YAML keys allowed under a field path.
func knownFields(path string) []string {
	t := reflect.TypeOf(Config{})
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			if i := strings.IndexByte(seg, '['); i >= 0 {
				seg = seg[:i]
			}
			t = deref(t)
			switch t.Kind() {
			case reflect.Map:
				t = deref(t.Elem())
				continue
			case reflect.Struct:
			default:
				return nil
			}
			f, ok := fieldByTag(t, seg)
			if !ok {
				// A map key (upstream name): step into the map's values.
				return nil
			}
			t = deref(f.Type)
			if t.Kind() == reflect.Slice {
				t = deref(t.Elem())
			}
		}
	}
	t = deref(t)
	if t.Kind() == reflect.Map {
		t = deref(t.Elem())
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("yaml"), ",")[0] == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

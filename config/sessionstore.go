package config

import (
	"fmt"
	"time"
)

// SessionStore is what replicas share through Redis: the TLCP sessions and
// TLS session ticket keys of the listeners with shared_sessions, and the
// ACME account, certificates and locks of the tls.acme sections with
// shared. Sessions are sealed with the keys before they leave the
// process.
type SessionStore struct {
	Redis *Redis `yaml:"redis"`
	// KeysFile is a file of sealing keys, one per line, each 64
	// hexadecimal digits (openssl rand -hex 32). The first seals, any
	// opens: add a new key second, move it first on every replica, remove
	// the old one a session lifetime later.
	KeysFile string `yaml:"keys_file,omitempty"`
	// KeysEnv names an environment variable that holds the keys instead,
	// separated by commas or white space.
	KeysEnv string `yaml:"keys_env,omitempty"`
}

// Redis is the Redis server (or cluster, or Sentinel-watched master) the
// replicas share.
type Redis struct {
	// Addrs are host:port addresses: one for a single server, several
	// for the nodes of a Redis Cluster; with MasterName, the Sentinels.
	Addrs []string `yaml:"addrs"`
	// MasterName is the name under which the Sentinels at Addrs monitor
	// the master: gmgate asks them where it is and follows it through
	// failovers.
	MasterName string `yaml:"master_name,omitempty"`
	Username   string `yaml:"username,omitempty"`
	// Password is refused: the password comes from PasswordEnv or
	// PasswordFile, so that it stays out of the file.
	Password     string `yaml:"password,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
	// SentinelUsername and SentinelPasswordEnv or SentinelPasswordFile
	// are the Sentinels' own credentials, when they require them
	// (Username and the password are the master's).
	SentinelUsername     string `yaml:"sentinel_username,omitempty"`
	SentinelPasswordEnv  string `yaml:"sentinel_password_env,omitempty"`
	SentinelPasswordFile string `yaml:"sentinel_password_file,omitempty"`
	// TLS connects to Redis over TLS (ca, cert, key, server_name, as for
	// https upstreams).
	TLS *UpstreamTLS `yaml:"tls,omitempty"`
	// DB is the database number (not in a Redis Cluster).
	DB int `yaml:"db,omitempty"`
	// KeyPrefix starts every key gmgate writes.
	KeyPrefix string `yaml:"key_prefix"`
	// Timeout bounds a session lookup during a handshake; past it the
	// handshake goes on as a full one.
	Timeout Duration `yaml:"timeout"`
}

// Session store defaults and bounds.
const (
	DefaultRedisKeyPrefix = "gmgate:"
	DefaultRedisTimeout   = 50 * time.Millisecond
	MinRedisTimeout       = time.Millisecond
	MaxRedisTimeout       = 5 * time.Second
)

// sessionStoreDefaults fills in the session store's defaults.
func (c *Config) sessionStoreDefaults() {
	if c.SessionStore == nil || c.SessionStore.Redis == nil {
		return
	}
	r := c.SessionStore.Redis
	setString(&r.KeyPrefix, DefaultRedisKeyPrefix)
	setDuration(&r.Timeout, DefaultRedisTimeout)
}

// sessionStorePaths makes the session store's files relative to dir.
func (c *Config) sessionStorePaths(file, key func(*string)) {
	ss := c.SessionStore
	if ss == nil {
		return
	}
	file(&ss.KeysFile)
	if r := ss.Redis; r != nil {
		file(&r.PasswordFile)
		file(&r.SentinelPasswordFile)
		if r.TLS != nil {
			file(&r.TLS.CA)
			file(&r.TLS.Cert)
			key(&r.TLS.Key)
		}
	}
}

// sessionStore checks the session store and the settings that use it.
func (v *validator) sessionStore(c *Config) {
	ss := c.SessionStore
	for i, l := range c.Listeners {
		p := fmt.Sprintf("listeners[%d]", i)
		if l.SharedSessions {
			switch {
			case ss == nil:
				v.add(p+".shared_sessions", "there is no session_store to share sessions through", "add session_store: with redis and keys_file at the top level, or remove shared_sessions")
			case l.Protocol == ProtocolHTTP:
				v.add(p+".shared_sessions", "an http listener has no sessions", "remove shared_sessions")
			case l.Protocol == ProtocolTLCP && !resumesTLCP(l.SiteList()):
				v.add(p+".shared_sessions", "session resumption is off (tlcp.session_cache.size is 0)", "remove shared_sessions, or remove session_cache.size: 0")
			}
		}
		for j, site := range l.SiteList() {
			if site.TLS != nil && site.TLS.ACME != nil && site.TLS.ACME.Shared && ss == nil {
				v.add(l.SitePath(p, j)+".tls.acme.shared", "there is no session_store to keep the ACME certificates in", "add session_store: with redis and keys_file at the top level, or remove shared")
			}
		}
	}
	if ss == nil {
		return
	}
	const p = "session_store"
	switch {
	case ss.KeysFile == "" && ss.KeysEnv == "":
		v.add(p, "no sealing keys", "set keys_file to a file of keys (openssl rand -hex 32 > keys), or keys_env to a variable that holds them")
	case ss.KeysFile != "" && ss.KeysEnv != "":
		v.add(p+".keys_env", "keys_file and keys_env are both set", "keep one of them")
	case ss.KeysFile != "":
		v.notInline(p+".keys_file", ss.KeysFile)
	}
	r := ss.Redis
	if r == nil {
		v.add(p+".redis", "no Redis server given", "add redis: with addrs: [\"redis:6379\"]")
		return
	}
	rp := p + ".redis"
	if len(r.Addrs) == 0 {
		what := `list the Redis server as ["redis:6379"], or the nodes of a Redis Cluster`
		if r.MasterName != "" {
			what = `list the Sentinels, as ["sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"]`
		}
		v.add(rp+".addrs", "no address given", what)
	}
	for i, a := range r.Addrs {
		v.hostPort(fmt.Sprintf("%s.addrs[%d]", rp, i), a, "")
	}
	if r.Password != "" {
		// Never repeat the value: it is a secret.
		v.add(rp+".password", "the password is written in the configuration", "use password_env: VAR or password_file: PATH so that it stays out of the file")
	}
	if r.PasswordEnv != "" && r.PasswordFile != "" {
		v.add(rp+".password_file", "password_env and password_file are both set", "keep one of them")
	}
	if r.MasterName != "" && r.SentinelPasswordEnv != "" && r.SentinelPasswordFile != "" {
		v.add(rp+".sentinel_password_file", "sentinel_password_env and sentinel_password_file are both set", "keep one of them")
	}
	if r.MasterName == "" {
		for _, f := range []struct{ name, val string }{
			{"sentinel_username", r.SentinelUsername}, {"sentinel_password_env", r.SentinelPasswordEnv}, {"sentinel_password_file", r.SentinelPasswordFile},
		} {
			if f.val != "" {
				v.add(rp+"."+f.name, "Sentinel credentials without master_name", "set master_name to the name the Sentinels monitor the master under, or remove "+f.name)
			}
		}
	}
	if r.DB < 0 {
		v.add(rp+".db", fmt.Sprintf("%d is not a database number", r.DB), "use 0 to 15 (or the server's databases setting)")
	} else if r.DB != 0 && len(r.Addrs) > 1 && r.MasterName == "" {
		v.add(rp+".db", "a Redis Cluster has database 0 only", "remove db, or give a single address")
	}
	if r.Timeout.D() < MinRedisTimeout || r.Timeout.D() > MaxRedisTimeout {
		v.add(rp+".timeout", fmt.Sprintf("%s is out of range", r.Timeout), "use a duration from 1ms to 5s; a lookup that takes longer costs a full handshake anyway")
	}
	if t := r.TLS; t != nil {
		if (t.Cert == "") != (t.Key == "") {
			v.add(rp+".tls", "a client certificate needs both cert and key", "set both or neither")
		}
		if t.Key != "" {
			v.keyRef(rp+".tls.key", t.Key)
		}
		for _, f := range []struct{ name, val string }{{"ca", t.CA}, {"cert", t.Cert}} {
			if f.val != "" {
				v.notInline(rp+".tls."+f.name, f.val)
			}
		}
	}
}

// resumesTLCP reports whether any of sites keeps TLCP sessions.
func resumesTLCP(sites []Site) bool {
	for _, site := range sites {
		if t := site.TLCP; t != nil && (t.SessionCache == nil || t.SessionCache.Size == nil || *t.SessionCache.Size != 0) {
			return true
		}
	}
	return false
}

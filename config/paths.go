package config

import (
	"net/url"
	"path/filepath"
	"strings"
)

// resolvePaths makes the relative paths of the configuration relative to
// dir: certificate and CA files, key references (the key file or SDF
// library, and password-file/pin-file), the access log file and the state
// directory.
func (c *Config) resolvePaths(dir string) {
	file := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) && !strings.Contains(*p, "-----BEGIN") {
			*p = filepath.Join(dir, *p)
		}
	}
	key := func(p *string) { *p = resolveKeyRef(dir, *p) }
	crls := func(r *Revocation) {
		if r == nil {
			return
		}
		for i := range r.CRL {
			if !RevocationURL(r.CRL[i]) {
				file(&r.CRL[i])
			}
		}
	}

	file(&c.StateDir)
	file(&c.Admin.TokenFile)
	file(&c.Admin.Cert)
	file(&c.Admin.Key)
	file(&c.Admin.ClientCA)
	if t := c.Admin.TLCP; t != nil {
		file(&t.SignCert)
		file(&t.SignKey)
		file(&t.EncCert)
		file(&t.EncKey)
	}
	switch c.Log.Access {
	case "", "stdout", "stderr", "off":
	default:
		file(&c.Log.Access)
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		sites := l.SiteList()
		for j := range sites {
			if t := sites[j].TLCP; t != nil {
				file(&t.SignCert)
				file(&t.EncCert)
				key(&t.SignKey)
				key(&t.EncKey)
				file(&t.ClientCA)
				crls(t.ClientRevocation)
			}
			if t := sites[j].TLS; t != nil {
				file(&t.Cert)
				key(&t.Key)
				file(&t.ClientCA)
				crls(t.ClientRevocation)
				if t.ACME != nil {
					file(&t.ACME.CARoot)
				}
				if sm := t.SM2; sm != nil {
					file(&sm.Cert)
					key(&sm.Key)
					file(&sm.ClientCA)
				}
			}
		}
	}
	c.sessionStorePaths(file, key)
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		if t := u.TLS; t != nil {
			file(&t.CA)
			file(&t.Cert)
			key(&t.Key)
			crls(t.Revocation)
		}
		if t := u.TLCP; t != nil {
			file(&t.CA)
			file(&t.SignCert)
			file(&t.EncCert)
			key(&t.SignKey)
			key(&t.EncKey)
			crls(t.Revocation)
		}
		if t := u.TLS13SM; t != nil {
			file(&t.CA)
			file(&t.SignCert)
			key(&t.SignKey)
			crls(t.Revocation)
		}
	}
}

// secretFileParams are the key reference parameters that name a file.
var secretFileParams = []string{"password-file", "pin-file"}

// resolveKeyRef makes the paths in a key reference absolute: a bare path,
// the path after the scheme (file:, sdf:), and the files its parameters
// name. Everything else is kept as written, so that `config show` prints
// the reference the way the operator wrote it.
func resolveKeyRef(dir, ref string) string {
	if ref == "" || strings.Contains(ref, "-----BEGIN") {
		return ref
	}
	scheme, rest, hasScheme := strings.Cut(ref, ":")
	if !hasScheme || strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") || len(scheme) < 2 {
		// A bare path, as accel.ParseRef reads it.
		if filepath.IsAbs(ref) {
			return ref
		}
		return filepath.Join(dir, ref)
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	if p := strings.TrimPrefix(path, "//"); p != "" && !filepath.IsAbs(p) {
		path = filepath.Join(dir, p)
	}
	out := scheme + ":" + path
	if !hasQuery {
		return out
	}
	params := strings.Split(query, "&")
	for i, kv := range params {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, f := range secretFileParams {
			if name != f {
				continue
			}
			v, err := url.QueryUnescape(value)
			if err != nil || v == "" || filepath.IsAbs(v) {
				break
			}
			params[i] = name + "=" + queryEscaper.Replace(filepath.Join(dir, v))
		}
	}
	return out + "?" + strings.Join(params, "&")
}

// queryEscaper escapes what url.ParseQuery would read differently in a
// path, and keeps the slashes readable.
var queryEscaper = strings.NewReplacer("%", "%25", "+", "%2B", "&", "%26", "#", "%23", ";", "%3B", " ", "%20", "=", "%3D")

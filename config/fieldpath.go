package config

import (
	"errors"
	"fmt"
	"strings"
)

// Field paths: each object decoded from the file knows where it is in it
// ("listeners[1]", "listeners[1].sites[0]", "upstreams.app"), so that the
// packages that build what the configuration describes name the field of
// a problem without spelling the schema again.

// numberPaths sets the field path of every listener, site and upstream.
// Defaults and Validate call it, so that a configuration built or changed
// in code gets the paths of its current shape.
func (c *Config) numberPaths() {
	for i := range c.Listeners {
		l := &c.Listeners[i]
		l.path = fmt.Sprintf("listeners[%d]", i)
		for j := range l.Sites {
			l.Sites[j].path = fmt.Sprintf("%s.sites[%d]", l.path, j)
		}
	}
	for name, u := range c.Upstreams {
		if u != nil {
			u.path = "upstreams." + name
		}
	}
}

// Path is the listener's field path ("listeners[1]").
func (l *Listener) Path() string { return l.path }

// Path is the site's field path: "listeners[1].sites[0]", or the
// listener's path for the one site of the flat form.
func (s *Site) Path() string { return s.path }

// Path is the upstream's field path ("upstreams.app").
func (u *Upstream) Path() string { return u.path }

// Field joins a field path and the name of a field under it.
func Field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// ListenerNamed returns the listener called name.
func (c *Config) ListenerNamed(name string) (*Listener, bool) {
	for i := range c.Listeners {
		if c.Listeners[i].Name == name {
			return &c.Listeners[i], true
		}
	}
	return nil, false
}

// FieldError is an error about one field of an object of the
// configuration, found while building what the object describes (a CA
// file that is not PEM, suites the key cannot serve). Field is its path
// under the object ("tls.ca"); Path, when set, is its whole path.
type FieldError struct {
	Field string
	Path  string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Path != "" {
		return e.Path + ": " + e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// ProblemAt places err, made while building the object at path base: at
// the field a *FieldError in err names, or at base itself; msgPrefix is
// trimmed from a message that is not a FieldError's.
func (c *Config) ProblemAt(base string, err error, msgPrefix string) Problem {
	var fe *FieldError
	if errors.As(err, &fe) {
		if fe.Path != "" {
			return c.Problem(fe.Path, fe.Err.Error(), "")
		}
		return c.Problem(Field(base, fe.Field), fe.Err.Error(), "")
	}
	return c.Problem(base, strings.TrimPrefix(err.Error(), msgPrefix), "")
}

// SourcePath is the field path of a side ("tlcp", "tls") of a listener
// or upstream whose certificates are the certificate store source named
// source: a listener's own name, or the upstream's name as sourceOf makes
// it. It is side alone when neither matches.
func (c *Config) SourcePath(source, side string, sourceOf func(upstream string) string) string {
	if l, ok := c.ListenerNamed(source); ok {
		return Field(l.Path(), side)
	}
	for name, u := range c.Upstreams {
		if u != nil && sourceOf(name) == source {
			if side == "tlcp" && u.Scheme() == SchemeTLS13SM {
				// Its identity is loaded as a sign-only TLCP pair.
				side = SchemeTLS13SM
			}
			return Field(u.Path(), side)
		}
	}
	return side
}

// RelatedPaths reports whether a problem of the file at path a makes a
// certificate or address problem at path b moot: the same field, a field
// under a (listeners[0].tlcp, listeners[0].tlcp.sign_cert), or a section
// above one of the file fields that it loads (listeners[0].tlcp.sign_key,
// listeners[0].tlcp). A problem without a path makes every one moot.
func RelatedPaths(a, b string) bool {
	if a == "" || b == "" || a == b {
		return true
	}
	under := func(x, y string) bool {
		return strings.HasPrefix(x, y) && (x[len(y)] == '.' || x[len(y)] == '[')
	}
	if under(b, a) {
		return true
	}
	if under(a, b) {
		switch a[strings.LastIndexByte(a, '.')+1:] {
		case "sign_cert", "sign_key", "enc_cert", "enc_key", "cert", "key":
			return true
		}
	}
	return false
}

// Package secret reads the secrets that key references name: a password or
// PIN is given as NAME-env=VAR (an environment variable) or NAME-file=PATH
// (a file), never written into the reference itself, so that references
// can sit in configuration files and logs.
package secret

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/gmgate/gmgate/internal/keyref"
)

// Check refuses what Read refuses before it reads anything: the secret
// written into the reference, or named twice.
func Check(params url.Values, name string) error {
	if params.Has(name) {
		return fmt.Errorf("the %s may not be written in the key reference; use %s-env=VAR or %s-file=PATH", name, name, name)
	}
	if params.Get(name+"-env") != "" && params.Get(name+"-file") != "" {
		return fmt.Errorf("give either %s-env or %s-file, not both", name, name)
	}
	return nil
}

// Read returns the secret that params name under name ("pin",
// "password"), or nil when neither NAME-env nor NAME-file is given.
func Read(params url.Values, name string) ([]byte, error) {
	if err := Check(params, name); err != nil {
		return nil, err
	}
	env, file := params.Get(name+"-env"), params.Get(name+"-file")
	switch {
	case env != "":
		s, ok := os.LookupEnv(env)
		if !ok {
			return nil, fmt.Errorf("environment variable %s (named by %s-env) is not set", env, name)
		}
		if s == "" {
			return nil, fmt.Errorf("environment variable %s (named by %s-env) is empty", env, name)
		}
		return []byte(s), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("reading %s-file %s: %w", name, file, err)
		}
		b = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(b) == 0 {
			return nil, fmt.Errorf("%s-file %s is empty", name, file)
		}
		return b, nil
	}
	return nil, nil
}

// Source says where Read takes the secret from, for messages: "environment
// variable VAR" or "file PATH"; empty when none is named.
func Source(params url.Values, name string) string {
	if v := params.Get(name + "-env"); v != "" {
		return "environment variable " + v
	}
	if f := params.Get(name + "-file"); f != "" {
		return "file " + f
	}
	return ""
}

// Redact returns a key reference with its whole query hidden, so that
// the reference can be shown in an error message whatever it carries.
func Redact(ref string) string { return keyref.Redact(ref) }

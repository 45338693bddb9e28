package sdf

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gmgate/gmgate/accel/internal/secret"
)

// Usage says which of the two key pairs at an index a key is.
type Usage int

const (
	// UsageSign is the signing key pair (SDF_ExportSignPublicKey_ECC,
	// SDF_InternalSign_ECC).
	UsageSign Usage = iota + 1
	// UsageEnc is the encryption key pair (SDF_ExportEncPublicKey_ECC,
	// SDF_InternalDecrypt_ECC).
	UsageEnc
)

func (u Usage) String() string {
	if u == UsageEnc {
		return "enc"
	}
	return "sign"
}

// Defaults for the reference parameters.
const (
	DefaultSessions = 4
	DefaultTimeout  = 2 * time.Second
	DefaultProfile  = "standard"
	maxSessions     = 1024
	maxTimeout      = 5 * time.Minute
	maxIndex        = 1 << 20
)

// Config is a parsed sdf: key reference.
type Config struct {
	// Library is the path of the vendor's SDF library.
	Library string
	// Index is the key index on the device (1 and up).
	Index uint32
	// Usage picks the signing or the encryption pair at Index.
	Usage Usage
	// PIN is the private-key access password; nil when the device grants
	// access without one (then SDF_GetPrivateKeyAccessRight is not
	// called).
	PIN []byte
	// PINSource says where the PIN came from, for messages.
	PINSource string
	// Sessions bounds the sessions opened on the library.
	Sessions int
	// Timeout bounds each operation, waiting for a session included.
	Timeout time.Duration
	Profile Profile
	// LockThread runs every session on one OS thread, for vendor
	// libraries whose sessions are bound to the thread that opened them.
	// It costs a thread wake-up per operation, tens of microseconds on a
	// busy host, so it is off unless asked for.
	LockThread bool
}

// params lists the parameters an sdf: reference may carry.
var params = map[string]string{
	"index":       "key index on the device, 1 and up (required)",
	"key":         "sign or enc: which key pair at the index (required)",
	"pin-env":     "environment variable holding the PIN",
	"pin-file":    "file holding the PIN",
	"sessions":    "sessions opened on the library (default 4)",
	"timeout":     "limit for one operation, waiting for a session included (default 2s)",
	"profile":     "vendor profile: " + profileNames(),
	"decrypt":     "SDF_InternalDecrypt_ECC prototype: v1, v2, v3, v4 or none",
	"alg-ids":     "algorithm ID numbering: 2012 or legacy",
	"coord":       "coordinate field width: 64 or 32",
	"cipher":      "ECCCipher layout: std or 2008",
	"lock-thread": "true or false: keep each session on one OS thread (default false)",
}

func knownParams() string {
	names := make([]string, 0, len(params)+1)
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ParseConfig reads the parameters of an sdf: key reference for the
// library at path. The PIN is read here, from the environment variable or
// file the reference names, once every other parameter is found good.
func ParseConfig(library string, q url.Values) (Config, error) {
	cfg, err := CheckConfig(library, q)
	if err != nil {
		return cfg, err
	}
	pin, err := secret.Read(q, "pin")
	if err != nil {
		return cfg, fmt.Errorf("sdf key reference: %w", err)
	}
	cfg.PIN, cfg.PINSource = pin, secret.Source(q, "pin")
	return cfg, nil
}

// CheckConfig is ParseConfig without reading the PIN: it refuses what
// ParseConfig refuses, a PIN named twice or written into the reference
// included, and reads nothing.
func CheckConfig(library string, q url.Values) (Config, error) {
	cfg := Config{Library: library, Sessions: DefaultSessions, Timeout: DefaultTimeout}
	if library == "" {
		return cfg, fmt.Errorf("sdf key reference has no library path; write sdf:/path/to/libsdf.so?index=1&key=sign")
	}
	for name, vals := range q {
		if _, ok := params[name]; !ok && name != "pin" {
			return cfg, fmt.Errorf("sdf key reference: unknown parameter %q (known: %s)", name, knownParams())
		}
		if len(vals) > 1 {
			return cfg, fmt.Errorf("sdf key reference: parameter %s given %d times", name, len(vals))
		}
	}
	if err := secret.Check(q, "pin"); err != nil {
		return cfg, fmt.Errorf("sdf key reference: %w", err)
	}

	switch v := q.Get("index"); {
	case v == "":
		return cfg, fmt.Errorf("sdf key reference: index= is missing; give the key index on the device, for example index=1")
	default:
		n, err := strconv.ParseUint(v, 10, 32)
		switch {
		case err != nil:
			return cfg, fmt.Errorf("sdf key reference: index=%q is not a number", v)
		case n == 0:
			return cfg, fmt.Errorf("sdf key reference: index=0 is the device's own key; user keys start at 1")
		case n > maxIndex:
			return cfg, fmt.Errorf("sdf key reference: index=%d is too large", n)
		}
		cfg.Index = uint32(n)
	}
	switch v := q.Get("key"); v {
	case "sign":
		cfg.Usage = UsageSign
	case "enc":
		cfg.Usage = UsageEnc
	case "":
		return cfg, fmt.Errorf("sdf key reference: key= is missing; an index holds a signing and an encryption pair, so write key=sign or key=enc")
	default:
		return cfg, fmt.Errorf("sdf key reference: key=%q; want key=sign or key=enc", v)
	}
	if v := q.Get("sessions"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSessions {
			return cfg, fmt.Errorf("sdf key reference: sessions=%q; want a number from 1 to %d (at most what the card's licence allows)", v, maxSessions)
		}
		cfg.Sessions = n
	}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxTimeout {
			return cfg, fmt.Errorf("sdf key reference: timeout=%q; want a duration such as 2s or 500ms, at most %v", v, maxTimeout)
		}
		cfg.Timeout = d
	}
	if v := q.Get("lock-thread"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("sdf key reference: lock-thread=%q; want true or false", v)
		}
		cfg.LockThread = b
	}
	var err error
	if cfg.Profile, err = parseProfile(q); err != nil {
		return cfg, fmt.Errorf("sdf key reference: %w", err)
	}
	return cfg, nil
}

// parseProfile starts from the named profile and applies the overrides.
func parseProfile(q url.Values) (Profile, error) {
	name := q.Get("profile")
	if name == "" {
		name = DefaultProfile
	}
	p, ok := Profiles[name]
	if !ok {
		return p, fmt.Errorf("profile=%q is not known (known: %s)", name, profileNames())
	}
	if v := q.Get("decrypt"); v != "" {
		d, ok := decryptNames[v]
		if !ok {
			return p, fmt.Errorf("decrypt=%q; want v1, v2, v3, v4 or none", v)
		}
		p.Decrypt = d
	}
	switch v := q.Get("alg-ids"); v {
	case "":
	case "2012":
		p.AlgIDs = AlgIDs2012
	case "legacy":
		p.AlgIDs = AlgIDsLegacy
	default:
		return p, fmt.Errorf("alg-ids=%q; want 2012 (GM/T 0006-2012) or legacy", v)
	}
	switch v := q.Get("coord"); v {
	case "":
	case "64":
		p.CoordLen = 64
	case "32":
		p.CoordLen = 32
	default:
		return p, fmt.Errorf("coord=%q; want 64 (GM/T 0018-2012) or 32", v)
	}
	if v := q.Get("cipher"); v != "" {
		c, ok := cipherNames[v]
		if !ok {
			return p, fmt.Errorf("cipher=%q; want std or 2008", v)
		}
		p.Cipher = c
	}
	return p, nil
}

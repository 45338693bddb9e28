package config

import "fmt"

// gm_capable_tls_clients: what a site does with a TLS ClientHello that
// offers TLCP cipher suites, the first hello of GM browsers such as 360
// Secure Browser (docs/protocol.md, "GM-capable TLS clients").
const (
	// GMCapableTLCP answers such a hello in TLCP 1.1, as the TASSL patch
	// for 360's browser does: the client gets the site's SM2 identity.
	GMCapableTLCP = "tlcp"
	// GMCapableTLS leaves it to TLS on an auto listener (what gmgate did
	// before), and refuses it with handshake_failure on a tlcp listener,
	// after which the browser retries with a TLCP hello.
	GMCapableTLS = "tls"
)

// gmCapableKey is the key's name in the file.
const gmCapableKey = "gm_capable_tls_clients"

// servesTLCP reports whether a site of a listener of protocol proto has a
// TLCP identity to answer GM-capable TLS clients with.
func servesTLCP(proto string, t *TLCP) bool {
	return t != nil && (proto == ProtocolTLCP || proto == ProtocolAuto)
}

// defaultGMCapable sets gm_capable_tls_clients where it means something:
// on the sites that serve TLCP. Elsewhere it stays empty, so that `config
// show` does not print a setting without effect.
func defaultGMCapable(proto string, t *TLCP, v *string) {
	if servesTLCP(proto, t) {
		setString(v, GMCapableTLCP)
	}
}

// gmCapable checks one gm_capable_tls_clients value at path.
func (v *validator) gmCapable(path, value string) {
	switch value {
	case "", GMCapableTLCP, GMCapableTLS:
	default:
		v.add(path, fmt.Sprintf("unknown value %q", value),
			"use tlcp (answer TLS hellos that offer TLCP suites in TLCP, the default) or tls (leave them to TLS; refuse them on a tlcp listener)")
	}
}

// GMCapableWarnings are the gm_capable_tls_clients settings of cfg's file
// that have no effect: on a site (or flat-form listener) without a TLCP
// identity, every TLS hello goes to TLS whatever the setting says. They
// serve, so they are warnings, not problems.
func GMCapableWarnings(cfg *Config) []Problem {
	var out []Problem
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		if l.Protocol == ProtocolHTTP || l.Protocol == ProtocolTCP {
			continue // refused by the validator
		}
		for _, site := range l.SiteList() {
			path := Field(site.Path(), gmCapableKey)
			// Where the file sets it: a configuration built in code may
			// hold the default of a protocol it had before.
			if !cfg.InFile(path) || servesTLCP(l.Protocol, site.TLCP) {
				continue
			}
			why, fix := "the site has no tlcp section", "remove it, or give the site its TLCP certificates (a tlcp section)"
			if l.Protocol == ProtocolTLS {
				why, fix = "a tls listener speaks no TLCP", "remove it, or set protocol: auto and add the TLCP certificates (a tlcp section)"
			}
			out = append(out, cfg.Problem(path,
				fmt.Sprintf("has no effect: %s, so TLS clients that offer TLCP suites get TLS", why), fix))
		}
	}
	return out
}

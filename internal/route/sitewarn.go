package route

import (
	"fmt"
	"net"
	"strings"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/hostname"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
)

// ecdheWithoutCAWarning warns once per listener about sites that list
// the ECDHE suites themselves under client_auth: none and name no
// client_ca. An ECDHE handshake needs the client's encryption
// certificate, so it asks for one naming no CA, and GmSSL clients then
// send none and fail. The default suite list is left alone: the server
// prefers the ECC suites, which every client without certificates takes,
// and keeps ECDHE for clients that have an encryption certificate.
func ECDHEWithoutCAWarning(cfg *config.Config, lc *config.Listener, sites []*Site) []config.Problem {
	confs := lc.SiteList()
	var at []int
	for j, site := range sites {
		tc := site.TLCP
		if tc == nil || j >= len(confs) || confs[j].TLCP == nil || confs[j].TLCP.SuitesDefaulted {
			continue
		}
		if tc.ClientAuth == tlcp.NoClientCert && tc.ClientCAs == nil && upstream.ServesECDHE(tc.CipherSuites) {
			at = append(at, j)
		}
	}
	if len(at) == 0 {
		return nil
	}
	which := ""
	if len(at) > 1 || !confs[at[0]].Implicit {
		names := make([]string, len(at))
		for k, j := range at {
			names[k] = confs[j].Name
		}
		which = " (sites " + strings.Join(names, ", ") + ")"
	}
	return []config.Problem{cfg.Problem(config.Field(confs[at[0]].Path(), "tlcp.suites"),
		"client_auth: none with the ECDHE suites listed"+which+" still asks ECDHE clients for their certificates, naming no CA, and GmSSL clients then cannot complete the handshake",
		"list only the ECC suites (ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3), or set client_ca to the CAs that issue your clients' certificates")}
}

// siteHostWarnings warns about a listener's sites that no client can
// reach as the operator meant: sites without a default one, which refuse
// every client that sends no SNI (most TLCP clients), and IP addresses in
// hosts, which never arrive as SNI.
func SiteHostWarnings(cfg *config.Config, lc *config.Listener, p string) []config.Problem {
	if len(lc.Sites) == 0 {
		return nil
	}
	var out []config.Problem
	hasDefault := false
	for _, site := range lc.Sites {
		hasDefault = hasDefault || site.Default
		for k, h := range site.Hosts {
			if net.ParseIP(h) == nil {
				continue
			}
			out = append(out, cfg.Problem(fmt.Sprintf("%s.hosts[%d]", site.Path(), k),
				fmt.Sprintf("%s is an IP address, which never arrives as a server name (SNI): a client that connects by address sends none and gets the default site", h),
				"make this site the default (default: true) to serve clients that connect by address, and list only host names"))
		}
	}
	if !hasDefault {
		out = append(out, cfg.Problem(p+".sites",
			"no site is the default, so every client that sends no server name (SNI), as most TLCP clients do, or one that no site lists, is refused with unrecognized_name",
			"add default: true to the site those clients should get"))
	}
	return out
}

// overlapWarnings are the host patterns of a listener's sites that more
// than one site answers for: an exact name of one site under another's
// wildcard (the exact name wins), which is worth a look.
func OverlapWarnings(cfg *config.Config, lc *config.Listener) []config.Problem {
	var out []config.Problem
	for j, a := range lc.Sites {
		for k, h := range a.Hosts {
			if strings.HasPrefix(h, "*.") {
				continue
			}
			name := hostname.Pattern(h)
			for m, b := range lc.Sites {
				if m == j {
					continue
				}
				for _, w := range b.Hosts {
					if pattern := hostname.Pattern(w); strings.HasPrefix(pattern, "*") && hostname.Match(pattern, name) {
						out = append(out, cfg.Problem(fmt.Sprintf("%s.hosts[%d]", a.Path(), k),
							fmt.Sprintf("%q is also under %q of %s (%s); the exact name wins, so site %s serves it", h, w, strings.TrimPrefix(b.Path(), lc.Path()+"."), b.Name, a.Name),
							"list each name under one site only, unless that is what you mean"))
					}
				}
			}
		}
	}
	return out
}

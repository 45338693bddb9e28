package proxy

import (
	"crypto"
	"crypto/rand"
	"errors"
	"sync/atomic"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// servesShangMi says whether the site answers TLS 1.3 ShangMi hellos
// (RFC 8998): on an auto listener, with its TLCP signing pair, unless
// tlcp.tls13_shangmi is off. A tls listener has no SM2 identity.
func (sp siteSpec) servesShangMi() bool {
	return sp.servesTLCP() && sp.lc.Protocol == config.ProtocolAuto && sp.cfg.TLCP.TLS13ShangMi != config.TLS13ShangMiOff
}

// siteShangMi makes the site's TLS 1.3 ShangMi configuration from its
// TLCP one (tc): the same identity (the signing certificate and key of
// the dual pair, from the certificate store, so that a reload or a
// rotation applies at once), the same client_auth, client_ca and
// accept_server_auth_client_certs, the same ALPN protocols, and sessions
// when TLCP resumes. A ticket carries its session sealed with the site's
// ticket key: kept across reloads, or with shared_sessions derived from
// the session store's keys for the site, so that every replica opens it.
// A session resumes only under the binding it was made under (the
// session context, the client certificate policy, the client CAs and the
// server certificate), and its client certificate is checked again.
func (s *Server) siteShangMi(sp siteSpec, gen *generation, protos []string, tc *tlcp.Config) *tls13.Config {
	source, store := sp.source(), gen.store
	identity := &shangMiIdentity{store: store, source: source}
	c := &tls13.Config{
		GetCertificate:              identity.get,
		NextProtos:                  protos,
		ClientAuth:                  tc.ClientAuth,
		ClientCAs:                   tc.ClientCAs,
		AcceptServerAuthClientCerts: tc.AcceptServerAuthClientCerts,
		SessionContext:              sp.sessionContext(),
		SessionTicketsDisabled:      tc.SessionsDisabled,
	}
	if verify := tc.VerifyConnection; verify != nil {
		// The TLCP side's checks of a connection (revocation of the
		// client's certificate) hold for TLS 1.3 ShangMi too, on full
		// and resumed handshakes alike.
		c.VerifyConnection = func(cs tls13.ConnectionState) error {
			return verify(tlcp.ConnectionState{
				ServerName:       cs.ServerName,
				PeerCertificates: cs.PeerCertificates,
				VerifiedChains:   cs.VerifiedChains,
				DidResume:        cs.DidResume,
			})
		}
	}
	for _, name := range sp.cfg.TLCP.TLS13Groups {
		if g, ok := config.TLS13Group(name); ok {
			c.CurvePreferences = append(c.CurvePreferences, g)
		}
	}
	if sc := sp.cfg.TLCP.SessionCache; sc != nil && sc.Lifetime != 0 {
		c.SessionLifetime = sc.Lifetime.D()
	}
	if c.SessionTicketsDisabled {
		return c
	}
	if sp.lc.SharedSessions && gen.shared != nil {
		c.SessionTicketKeys = gen.shared.store.TicketKeys(source + " " + "tls1.3-sm")
		return c
	}
	if gen.shangMiTicketKeys == nil {
		gen.shangMiTicketKeys = map[string][32]byte{}
	}
	key, ok := gen.shangMiTicketKeys[source]
	if !ok {
		if _, err := rand.Read(key[:]); err != nil {
			panic("proxy: no randomness for a ticket key: " + err.Error())
		}
		gen.shangMiTicketKeys[source] = key
	}
	c.SessionTicketKeys = [][32]byte{key}
	return c
}

// shangMiIdentity serves a site's TLCP signing pair as its TLS 1.3
// identity. The conversion is kept until the store's certificate
// changes, so that a handshake does not allocate one.
type shangMiIdentity struct {
	store  *certs.Store
	source string
	last   atomic.Pointer[shangMiCert]
}

type shangMiCert struct {
	from *tlcp.Certificate
	cert *tls13.Certificate
}

var errNoShangMiKey = errors.New("the TLCP signing key cannot sign (it is not a crypto.Signer)")

func (id *shangMiIdentity) get(*tls13.ClientHelloInfo) (*tls13.Certificate, error) {
	var from *tlcp.Certificate
	if id.store != nil {
		from = id.store.TLCPCertificate(id.source)
	}
	if from == nil {
		return nil, errors.New("no TLCP certificate for " + id.source)
	}
	if last := id.last.Load(); last != nil && last.from == from {
		return last.cert, nil
	}
	signer, ok := from.SignKey.(crypto.Signer)
	if !ok {
		return nil, errNoShangMiKey
	}
	cert := &tls13.Certificate{Certificate: from.SignCertificate, PrivateKey: signer, Leaf: from.SignLeaf}
	id.last.Store(&shangMiCert{from: from, cert: cert})
	return cert, nil
}

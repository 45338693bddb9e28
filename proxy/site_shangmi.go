package proxy

import (
	"crypto"
	"crypto/rand"
	"errors"
	"sync/atomic"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/edge"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// servesShangMi says whether the site answers TLS 1.3 ShangMi hellos
// (RFC 8998) with its TLCP signing pair: on an auto listener, unless
// tlcp.tls13_shangmi is off or the tls section has an sm2 identity
// (servesSM2), which takes the pair's place.
func (sp siteSpec) servesShangMi() bool {
	return sp.servesTLCP() && sp.lc.Protocol == config.ProtocolAuto && sp.cfg.TLCP.ServesShangMi(sp.cfg.TLS)
}

// servesSM2 says whether the site answers TLS 1.3 ShangMi hellos with the
// SM2 identity of its tls section (tls.sm2): on tls and auto listeners,
// unless its tls13_shangmi is off.
func (sp siteSpec) servesSM2() bool {
	return sp.cfg.TLS != nil && sp.cfg.TLS.SM2.Serves() && (sp.lc.Protocol == config.ProtocolTLS || sp.lc.Protocol == config.ProtocolAuto)
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
	identity := &shangMiIdentity{store: gen.store, source: sp.source()}
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
	c.CurvePreferences = shangMiGroups(sp.cfg.TLCP.TLS13Groups)
	if sc := sp.cfg.TLCP.SessionCache; sc != nil && sc.Lifetime != 0 {
		c.SessionLifetime = sc.Lifetime.D()
	}
	s.shangMiTickets(sp, gen, c)
	return c
}

// siteSM2 makes the site's TLS 1.3 ShangMi configuration from the SM2
// identity of its tls section (tls.sm2), on tls and auto listeners: the
// certificate and key from the certificate store (a reload or a
// rotation applies at once), the tls section's client_auth with the SM2
// CAs of tls.sm2.client_ca, its client_revocation (one checker with the
// crypto/tls side, which knows the CAs of both CA files), the ALPN
// protocols, and tickets as siteShangMi makes them. A ticket resumes only
// on this site and only while client_auth, the client CAs and the SM2
// certificate are what they were; the client's certificate is checked
// again (chain and revocation) on resumption.
func (s *Server) siteSM2(sp siteSpec, gen *generation, protos []string) (*tls13.Config, error) {
	t, sm := sp.cfg.TLS, sp.cfg.TLS.SM2
	identity := &shangMiIdentity{store: gen.store, source: sp.source(), sm2: true}
	c := &tls13.Config{
		GetCertificate:   identity.get,
		NextProtos:       protos,
		ClientAuth:       edge.TlcpClientAuth(t.ClientAuth),
		SessionContext:   sp.sessionContext(),
		CurvePreferences: shangMiGroups(sm.TLS13Groups),
	}
	if sm.ClientCA != "" {
		pool, err := edge.LoadSMPool(sm.ClientCA)
		if err != nil {
			return nil, &config.FieldError{Path: config.Field(sp.cfg.Path(), "tls.sm2.client_ca"), Err: err}
		}
		c.ClientCAs = pool
	}
	if chk := s.tlsClientRevocation(sp, gen); chk != nil {
		c.VerifyConnection = verifyTLS13Revocation(chk)
	}
	s.shangMiTickets(sp, gen, c)
	return c, nil
}

// tlsClientRevocation is the checker of the client certificates a site's
// tls section verifies: those of crypto/tls clients against client_ca
// and, with an sm2 identity that serves, those of TLS 1.3 ShangMi clients
// against sm2.client_ca; its CRL files may come from the CAs of either.
func (s *Server) tlsClientRevocation(sp siteSpec, gen *generation) *revocation.Checker {
	t := sp.cfg.TLS
	cas := []string{}
	if sp.servesTLS() {
		cas = append(cas, t.ClientCA)
	}
	if sp.servesSM2() {
		cas = append(cas, t.SM2.ClientCA)
	}
	return gen.revocation.checker(s, siteScope(sp, "tls"), config.Field(sp.cfg.Path(), "tls.client_revocation"), t.ClientRevocation, cas, gen.cfg, false)
}

// shangMiGroups are the groups tls13_groups names, in its order.
func shangMiGroups(names []string) []tls13.CurveID {
	var out []tls13.CurveID
	for _, name := range names {
		if g, ok := config.TLS13Group(name); ok {
			out = append(out, g)
		}
	}
	return out
}

// shangMiTickets gives a site's TLS 1.3 ShangMi configuration its ticket
// keys (unless tickets are off): with shared_sessions derived from the
// session store's keys for the site, else a key of the site kept across
// reloads.
func (s *Server) shangMiTickets(sp siteSpec, gen *generation, c *tls13.Config) {
	source := sp.source()
	if c.SessionTicketsDisabled {
		return
	}
	if sp.lc.SharedSessions && gen.shared != nil {
		c.SessionTicketKeys = gen.shared.store.TicketKeys(source + " " + "tls1.3-sm")
		return
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
}

// shangMiIdentity serves a site's TLCP signing pair, or with sm2 the SM2
// identity of its tls section, as its TLS 1.3 identity. The conversion is
// kept until the store's certificate changes, so that a handshake does
// not allocate one.
type shangMiIdentity struct {
	store  *certs.Store
	source string
	sm2    bool
	last   atomic.Pointer[shangMiCert]
}

type shangMiCert struct {
	from *tlcp.Certificate
	cert *tls13.Certificate
}

var errNoShangMiKey = errors.New("the SM2 signing key cannot sign (it is not a crypto.Signer)")

func (id *shangMiIdentity) get(*tls13.ClientHelloInfo) (*tls13.Certificate, error) {
	var from *tlcp.Certificate
	switch {
	case id.store == nil:
	case id.sm2:
		from = id.store.SM2Certificate(id.source)
	default:
		from = id.store.TLCPCertificate(id.source)
	}
	if from == nil {
		return nil, errors.New("no SM2 certificate for " + id.source)
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

// Package revocation decides whether a verified client certificate has
// been revoked, from certificate revocation lists (CRLs) and from OCSP
// responders, with SM2 (SM2-with-SM3, GM/T 0015 / GB/T 20518 profile) as
// well as RSA and ECDSA signatures.
//
// It is called after the chain has been verified, from a
// VerifyConnection-style callback of tlcp or crypto/tls, on full and on
// resumed handshakes alike:
//
//	checker, err := revocation.New(revocation.Options{
//		CRL:    &revocation.CRLOptions{Sources: []string{"/etc/gmgate/ca.crl", "http://ca.example.cn/ca.crl"}, Issuers: clientCAs},
//		Policy: revocation.FailClosed,
//	})
//	go checker.Run(ctx)                    // first load, then refresh; checker.Close() once replaced
//	tlcpConfig.VerifyConnection = func(cs tlcp.ConnectionState) error {
//		return checker.VerifyTLCP(context.Background(), cs.PeerCertificates, cs.VerifiedChains)
//	}
//	tlsConfig.VerifyConnection = func(cs tls.ConnectionState) error {
//		return checker.VerifyX509(context.Background(), cs.VerifiedChains)
//	}
//
// A CRL is accepted only when its signature verifies with a CA whose
// subject is the CRL's issuer (one of the configured CAs, or else the
// issuer in the verified chain being checked: an intermediate the client
// sent), when it is a complete (not delta, not indirect) v2 CRL with a
// nextUpdate, and when it is not older than the CRL it replaces. A source that cannot be read
// keeps its last good CRL until the CRL's nextUpdate plus a grace
// (DefaultGrace, one hour: enough for a CA that publishes late or a
// distribution point that is down for a moment, short enough that a
// revocation is not hidden for long); after that the certificates it
// covers have an unknown status, and the Policy decides: FailClosed
// refuses them, FailOpen admits them.
//
// OCSP responses are cached in memory, bounded in entries and bytes,
// until their nextUpdate; a responder that cannot be reached is not asked
// again for a while, and a cached response serves until its nextUpdate
// plus the grace.
//
// Sources going stale and certificates refused are reported to an
// Observer, so that metrics and log lines can be written by the caller:
// this package imports no metrics library and logs nothing itself.
//
// It must not verify chains (the caller did, with its trust roots), speak
// a protocol, or read configuration files; sizes, timeouts and the number
// of concurrent fetches are bounded, since CRLs and OCSP responses come
// from the network.
package revocation

// Package certs loads, checks and serves the certificates gmgate runs
// with: the TLCP dual pairs and TLS certificates of the listeners and
// upstreams (LoadTLCP, LoadTLS), the live set that a reload swaps (Store),
// and the CA pools that verify clients (CAPool, TLSCAPool).
//
// It must not issue certificates (that is package certs/pki, the offline
// tools behind gmgate cert) or talk to an ACME CA (package certs/acme),
// speak the protocol (package tlcp), or open keys itself: every private
// key the loader reads is opened through accel.Open, so a key reference
// (file:..., sdf:...) works wherever a key file does.
//
// # Loading certificates
//
//	tc, err := certs.LoadTLCP(signCert, signKeyRef, encCert, encKeyRef)
//	c, err := certs.LoadTLS(cert, keyRef)
//
// LoadTLCPFiles and LoadTLSFiles take LoadOptions (trusted roots for chain
// checks, the clock) and also return warnings. Loading checks that each
// key belongs to its certificate, that sign and enc are not swapped, key
// usages, expiry, and the order (and, with roots, completeness) of each
// chain. Errors name the configuration field and file and say what to do,
// for example:
//
//	sign_key /etc/gmgate/a.sign.key does not belong to sign_cert /etc/gmgate/a.sign.crt (the public keys differ); give the key that was generated with this certificate
//
// Errors never contain key material or passwords.
//
// # Serving and reloading
//
// A Store holds named certificate sets and swaps them atomically:
//
//	store, err := certs.NewStore(certs.StoreOptions{Logger: logger}, certs.Source{Name: "edge", TLCP: &certs.TLCPFiles{...}, TLS: &certs.TLSFiles{...}})
//	tlcpConfig.GetCertificate = store.GetTLCPCertificate
//	tlsConfig.GetCertificate = store.GetTLSCertificate
//	prometheus.MustRegister(store)                       // gmgate_certificate_expiry_timestamp_seconds{name,role}
//	go store.Watch(ctx)                                  // reload when the files change
//	store.Reload()                                       // on SIGHUP
//
// A reload that fails keeps the previous set and logs why (and Reload
// returns the error). Connections already established are not touched.
//
// ACME certificates (package certs/acme) reach a Store through
// StoreOptions.TLSFallback.
package certs

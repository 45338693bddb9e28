// Package certs generates, loads, checks, inspects and migrates the
// certificates gmgate serves, and keeps the live set for the listeners.
//
// It must not speak the protocol (that is package tlcp) nor open keys
// itself: every private key the loader reads is opened through
// accel.Open, so a key reference (file:..., sdf:...) works wherever a key
// file does.
//
// # Making certificates
//
//	ca, err := certs.NewCA(certs.CAOptions{})            // SM2 root (Intermediate: true adds one)
//	err = ca.Write(dir, nil)                             // ca.crt, ca.key (0600)
//	ca, err = certs.LoadCA(dir)                          // reuse on the next start
//	pair, err := ca.IssueDual(certs.IssueOptions{DNSNames: []string{"example.cn"}})
//	files, err := pair.Write(dir, "example.cn", nil)     // example.cn.{sign,enc}.{crt,key}, ca.crt
//	tc := pair.Certificate()                             // *tlcp.Certificate, ready to serve
//
// Issued pairs are shaped for the strictest deployed peer: the signing and
// encryption certificates carry byte-identical subject, subjectAltName and
// issuer; serials are random 128-bit; validity is at most MaxValidity
// (3653 days); end-entity certificates have no BasicConstraints
// extension; EKU is serverAuth and clientAuth; the signing certificate has
// digitalSignature and nonRepudiation, the encryption certificate
// keyEncipherment, dataEncipherment and keyAgreement. Keys are PKCS#8,
// written 0600; with a password they are encrypted as PBES2 with PBKDF2
// (hmacWithSM3, no NULL parameters) and SM4-CBC, the layout GmSSL, Tongsuo
// and OpenSSL all read.
//
// For the TLS side of a demo, an ECDSA CA (CAOptions.KeyAlgorithm =
// KeyECDSAP256) issues with (*CA).IssueTLS. NewDualCSR makes the two
// requests an external GM CA asks for. Migrate turns RSA or ECDSA
// certificates into an SM2 pair with the same names.
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
// # ACME
//
// NewACME obtains and renews RSA/ECDSA certificates for the TLS side
// through certmagic, with its storage under the state directory; its
// GetCertificate serves them (StoreOptions.TLSFallback plugs it into a
// Store).
package certs

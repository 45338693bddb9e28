// Package pki is gmgate's offline certificate tooling, behind
// gmgate cert: SM2 (and ECDSA/RSA) certificate authorities, dual TLCP
// pairs and TLS certificates issued from them, dual CSRs for an external
// GM CA and CSR signing, inspection of certificate and key files
// (Inspect), verification against roots (VerifyFiles), and migration of
// RSA/ECDSA deployments to SM2 pairs with the same names (Migrate).
//
// It must not be imported by the running server (package proxy): what the
// server loads and serves is package certs. It does not import certs
// either, so that the runtime's tests can issue with it.
//
// # Making certificates
//
//	ca, err := pki.NewCA(pki.CAOptions{})                // SM2 root (Intermediate: true adds one)
//	err = ca.Write(dir, nil)                             // ca.crt, ca.key (0600)
//	ca, err = pki.LoadCA(dir)                            // reuse on the next start
//	pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"example.cn"}})
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
package pki

// Package acme obtains and renews the TLS side's certificates from an
// ACME CA (Let's Encrypt or a private one) through certmagic: Manager
// answers the HTTP-01 and TLS-ALPN-01 challenges where gmgate serves
// them, reports issuance in metrics, and serves the certificates through
// GetCertificate (a certs.Store takes it as StoreOptions.TLSFallback).
// RedisStorage keeps certmagic's certificates, account and locks in
// Redis, sealed, so that replicas share them.
//
// It must not serve TLCP (ACME certificates are for the TLS side) nor
// load the configured certificate files (that is package certs).
package acme
